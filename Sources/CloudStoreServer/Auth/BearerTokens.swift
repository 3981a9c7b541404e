import Crypto
import Foundation
import Synchronization

/// The bearer tokens the server accepts: each user's, mapped to a userRecordName, and the
/// operator's. The users' tokens can be replaced while the server runs (`SIGHUP` reloads the
/// tokens file of `cloudstore serve`); requests already authenticated are not affected.
///
/// Lookups compare SHA-256 digests of the presented token against every known token's digest in
/// constant time, so neither timing nor the table's order tells anything about a secret. Tokens are
/// kept only as digests.
final class BearerTokens: Sendable {
    private typealias Entry = (digest: [UInt8], caller: Caller)
    private let entries: Mutex<[Entry]>
    private let operatorEntry: Entry?

    init(_ users: [String: String], operatorToken: String? = nil) {
        operatorEntry = operatorToken.map { (Self.digest($0), .operator) }
        entries = Mutex(Self.entries(users) + [operatorEntry].compactMap { $0 })
    }

    /// Replaces the users' tokens; the operator's stays.
    func replaceUsers(_ users: [String: String]) {
        let replaced = Self.entries(users) + [operatorEntry].compactMap { $0 }
        entries.withLock { $0 = replaced }
    }

    private static func entries(_ users: [String: String]) -> [Entry] {
        users.map { (digest($0.key), .user($0.value)) }
    }

    /// True when no user can sign in (the operator token does not count).
    var hasNoUsers: Bool {
        entries.withLock { !$0.contains { if case .user = $0.caller { true } else { false } } }
    }

    /// Whether a token maps to this userRecordName: the users a share may invite.
    func isKnownUser(_ userRecordName: String) -> Bool {
        entries.withLock { $0.contains { $0.caller == .user(userRecordName) } }
    }

    /// The caller a token belongs to, or nil.
    func caller(for token: String) -> Caller? {
        let presented = Self.digest(token)
        let entries = entries.withLock { $0 }
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
