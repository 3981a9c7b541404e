import Crypto
import Foundation

/// The bearer tokens the server accepts: each user's, mapped to a userRecordName, and the
/// operator's.
///
/// Lookups compare SHA-256 digests of the presented token against every known token's digest in
/// constant time, so neither timing nor the table's order tells anything about a secret. Tokens are
/// kept only as digests.
struct BearerTokens: Sendable {
    private let entries: [(digest: [UInt8], caller: Caller)]

    init(_ users: [String: String], operatorToken: String? = nil) {
        entries = users.map { (Self.digest($0.key), .user($0.value)) } + [operatorToken].compactMap { token in
            token.map { (Self.digest($0), .operator) }
        }
    }

    /// True when no user can sign in (the operator token does not count).
    var hasNoUsers: Bool { !entries.contains { if case .user = $0.caller { true } else { false } } }

    /// The caller a token belongs to, or nil.
    func caller(for token: String) -> Caller? {
        let presented = Self.digest(token)
        var match: Caller?
        for entry in entries {
            var difference: UInt8 = 0
            for index in 0..<presented.count {
                difference |= presented[index] ^ entry.digest[index]
            }
            if difference == 0 { match = entry.caller }
        }
        return match
    }

    private static func digest(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Data(token.utf8)))
    }
}
