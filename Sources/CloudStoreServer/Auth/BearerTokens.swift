import Crypto
import Foundation

/// The bearer tokens the server accepts, each mapped to a userRecordName.
///
/// Lookups compare SHA-256 digests of the presented token against every known token's digest in
/// constant time, so neither timing nor the table's order tells anything about a secret. Tokens are
/// kept only as digests.
struct BearerTokens: Sendable {
    private let entries: [(digest: [UInt8], userRecordName: String)]

    init(_ users: [String: String]) {
        entries = users.map { (Self.digest($0.key), $0.value) }
    }

    var isEmpty: Bool { entries.isEmpty }

    /// The user a token belongs to, or nil.
    func user(for token: String) -> String? {
        let presented = Self.digest(token)
        var match: String?
        for entry in entries {
            var difference: UInt8 = 0
            for index in 0..<presented.count {
                difference |= presented[index] ^ entry.digest[index]
            }
            if difference == 0 { match = entry.userRecordName }
        }
        return match
    }

    private static func digest(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Data(token.utf8)))
    }
}
