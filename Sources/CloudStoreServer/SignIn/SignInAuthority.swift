import CloudStoreWire
import Crypto
import Foundation
import NIOPosix
import Synchronization

/// The server's side of sign-in: who may sign in (``SignInUsers``), the keys derived from the
/// file's secret, and the checks of passwords, web auth tokens, sign-in forms and return URLs.
/// Without sign-in users it answers as a server that has no sign-in page: nobody signs in, no
/// token verifies, 421s carry no `redirectURL`.
///
/// The users can be replaced while the server runs (`SIGHUP` reloads the file of `cloudstore
/// serve`): later requests see only the new ones, so a removed user's tokens are refused from the
/// next request on, and a new secret refuses every token of the old one.
///
/// Keys, each HKDF-SHA256 of the secret with its own `info`, so that no key can stand for
/// another: the web auth tokens' (``WebAuthToken``) and the sign-in form's (a form token binds the
/// form to the browser's cookie, so no other site can post it).
final class SignInAuthority: Sendable {
    /// The users with what the server derives from them.
    private struct Current: Sendable {
        var usersByLogin: [String: SignInUsers.User]
        /// userRecordName → credential stamp (``credentialStamp(of:key:)``).
        var credentials: [String: String]
        var allowedOrigins: [String]
        var tokenKey: SymmetricKey
        var formKey: SymmetricKey
        /// A hash that matches no password, checked for an unknown login so that the answer takes
        /// as long as for a known one.
        var decoy: SignInUsers.PasswordHash
    }

    private let current: Mutex<Current?>

    init(_ users: SignInUsers?) {
        current = Mutex(users.map(Self.current))
    }

    /// Replaces the users, the secret and the allowed redirects; nil turns sign-in off.
    func replace(_ users: SignInUsers?) {
        let replaced = users.map(Self.current)
        current.withLock { $0 = replaced }
    }

    private static func current(_ users: SignInUsers) -> Current {
        let secret = SymmetricKey(data: Data(users.secret.utf8))
        func key(_ info: String) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: secret, salt: Data("cloudstore sign-in".utf8), info: Data(info.utf8), outputByteCount: 32)
        }
        let tokenKey = key("web auth token v1")
        var usersByLogin: [String: SignInUsers.User] = [:]
        var passwords: [String: [SignInUsers.PasswordHash]] = [:]
        for user in users.users {
            usersByLogin[user.login] = user
            passwords[user.userRecordName, default: []].append(user.password)
        }
        let credentials = passwords.mapValues { credentialStamp(of: $0, key: tokenKey) }
        let iterations = users.users.first?.password.iterations ?? SignInUsers.PasswordHash.defaultIterations
        return Current(
            usersByLogin: usersByLogin, credentials: credentials,
            allowedOrigins: users.allowedRedirects.compactMap(RedirectOrigin.allowed), tokenKey: tokenKey,
            formKey: key("sign-in form v1"),
            decoy: SignInUsers.PasswordHash(iterations: iterations, salt: Data(count: 16), hash: Data(count: 32)))
    }

    /// A short MAC of a user's password hashes (one per login): it changes when any of their
    /// passwords does, and tells nothing of them.
    private static func credentialStamp(of passwords: [SignInUsers.PasswordHash], key: SymmetricKey) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: passwords.reduce(Data()) { $0 + $1.salt + $1.hash }, using: key)
        return Base64URL.encode(Data(code).prefix(12))
    }

    /// Whether the server has sign-in users (then it serves the sign-in page and 421s carry its URL).
    var isConfigured: Bool { current.withLock { $0 != nil } }

    /// The origins the sign-in page may return a browser to.
    var allowedOrigins: [String] { current.withLock { $0?.allowedOrigins ?? [] } }

    /// Whether someone may sign in as this userRecordName: a user a share may invite.
    func isKnownUser(_ userRecordName: String) -> Bool {
        current.withLock { $0?.credentials[userRecordName] != nil }
    }

    // MARK: - Passwords

    /// The user whose login and password these are, or nil. Checks the password with PBKDF2 on
    /// NIO's thread pool (a fraction of a second of CPU, which must not hold a cooperative thread),
    /// also for an unknown login, against a decoy, so that the time tells nothing.
    func user(login: String, password: String) async throws -> SignInUsers.User? {
        guard let current = current.withLock({ $0 }) else { return nil }
        let user = current.usersByLogin[login]
        let hash = user?.password ?? current.decoy
        let matches = try await NIOThreadPool.singleton.runIfActive { hash.matches(password) }
        return matches ? user : nil
    }

    // MARK: - Web auth tokens

    /// A token for `user` in `container`, lasting `lifetime` from `now`; nil without sign-in users.
    func token(for user: SignInUsers.User, container: String, now: Date, lifetime: TimeInterval) -> (
        text: String, expires: Date
    )? {
        guard let current = current.withLock({ $0 }), let credential = current.credentials[user.userRecordName] else {
            return nil
        }
        let expires = Int64((now.timeIntervalSince1970 + lifetime).rounded(.down))
        let token = WebAuthToken(
            container: container, userRecordName: user.userRecordName, expires: expires, credential: credential)
        return (token.signed(with: current.tokenKey), Date(timeIntervalSince1970: Double(expires)))
    }

    /// The caller a web auth token signs in to `container`; nil when the server has no sign-in
    /// users or `token` is not shaped like a web auth token (it may be an unknown bearer token).
    ///
    /// - Throws: 401 `AUTHENTICATION_FAILED` saying to sign in again, for a token that is forged
    ///   (or signed with another secret), expired, of another container, or of a user who may no
    ///   longer sign in or changed their password.
    func caller(forWebAuthToken text: String, container: String, now: Date) throws(APIError) -> Caller? {
        guard let current = current.withLock({ $0 }) else { return nil }
        switch WebAuthToken.verified(text, key: current.tokenKey) {
        case .notAToken:
            return nil
        case .forged:
            throw APIError(
                .authenticationFailed,
                "the web auth token does not verify (it was altered, or signed with another secret): sign in again")
        case .valid(let token):
            let credential = current.credentials[token.userRecordName]
            if let refusal = token.refusal(container: container, now: now, credential: credential) {
                throw APIError(.authenticationFailed, refusal)
            }
            return .user(token.userRecordName)
        }
    }

    // MARK: - Sign-in forms

    /// The form token that goes with a browser's sign-in cookie (`nonce`) on the sign-in page of
    /// `container` and `environment`; nil without sign-in users.
    func formToken(nonce: Data, container: String, environment: CloudEnvironment) -> String? {
        guard let key = current.withLock({ $0?.formKey }) else { return nil }
        return Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Self.formMessage(nonce, container, environment), using: key)))
    }

    /// Whether a posted form token goes with the browser's cookie, checked in constant time.
    func isValidFormToken(_ token: String, nonce: Data, container: String, environment: CloudEnvironment) -> Bool {
        guard let key = current.withLock({ $0?.formKey }), let code = Base64URL.decode(token) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(
            code, authenticating: Self.formMessage(nonce, container, environment), using: key)
    }

    private static func formMessage(_ nonce: Data, _ container: String, _ environment: CloudEnvironment) -> Data {
        nonce + Data("\u{0}\(container)\u{0}\(environment.rawValue)".utf8)
    }
}
