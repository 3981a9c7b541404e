import Crypto
import Foundation
import Synchronization

/// The tokens the server accepts: each user's bearer token, mapped to a userRecordName, the
/// operator's, and each container's API tokens (`ckAPIToken`, by name). The users' and the API
/// tokens can be replaced while the server runs (`SIGHUP` reloads the files of `cloudstore
/// serve`); requests already authenticated are not affected.
///
/// Lookups compare SHA-256 digests of the presented token against every known token's digest in
/// constant time, so neither timing nor the table's order tells anything about a secret. Tokens are
/// kept only as digests.
final class BearerTokens: Sendable {
    private typealias Entry = (digest: [UInt8], caller: Caller)
    private typealias APIEntry = (digest: [UInt8], container: String, name: String)
    private let entries: Mutex<[Entry]>
    private let apiEntries: Mutex<[APIEntry]>
    private let operatorEntry: Entry?

    init(_ users: [String: String], operatorToken: String? = nil, apiTokens: [String: [String: String]] = [:]) {
        operatorEntry = operatorToken.map { (Self.digest($0), .operator) }
        entries = Mutex(Self.entries(users) + [operatorEntry].compactMap { $0 })
        apiEntries = Mutex(Self.apiEntries(apiTokens))
    }

    /// Replaces the users' tokens; the operator's stays.
    func replaceUsers(_ users: [String: String]) {
        let replaced = Self.entries(users) + [operatorEntry].compactMap { $0 }
        entries.withLock { $0 = replaced }
    }

    /// Replaces the API tokens (container → name → token).
    func replaceAPITokens(_ tokens: [String: [String: String]]) {
        let replaced = Self.apiEntries(tokens)
        apiEntries.withLock { $0 = replaced }
    }

    private static func entries(_ users: [String: String]) -> [Entry] {
        users.map { (digest($0.key), .user($0.value)) }
    }

    private static func apiEntries(_ tokens: [String: [String: String]]) -> [APIEntry] {
        tokens.flatMap { container, names in names.map { (digest($0.value), container, $0.key) } }
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
        for entry in entries where ConstantTime.equal(presented, entry.digest) { match = entry.caller }
        return match
    }

    /// Whether the container has API tokens: without any, `ckAPIToken` is not checked.
    func hasAPITokens(for container: String) -> Bool {
        apiEntries.withLock { $0.contains { $0.container == container } }
    }

    /// The name of the container's API token `token`, or nil.
    func apiTokenName(_ token: String, in container: String) -> String? {
        let presented = Self.digest(token)
        let entries = apiEntries.withLock { $0 }
        var match: String?
        for entry in entries where ConstantTime.equal(presented, entry.digest) && entry.container == container { match = entry.name }
        return match
    }

    private static func digest(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Data(token.utf8)))
    }
}
