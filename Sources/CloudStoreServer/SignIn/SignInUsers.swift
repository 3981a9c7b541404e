import Crypto
import Foundation
import _CryptoExtras

/// The people who may sign in on the server's sign-in page (`cloudstore serve --sign-in-users
/// FILE`), the secret that signs the web auth tokens it issues, and the origins it may send a
/// browser back to (<doc:UsingExistingCloudKitClients>).
///
/// The file, as JSON (`cloudstore hash-password` prints a user's entry):
///
/// ```json
/// {"secret": "a random text of 32 characters or more: openssl rand -base64 32",
///  "allowedRedirects": ["https://notes.example.com", "http://localhost:3000"],
///  "users": [{"userRecordName": "_alice", "login": "alice",
///             "password": {"algorithm": "PBKDF2-HMAC-SHA256", "iterations": 600000,
///                          "salt": "<base64>", "hash": "<base64>"}}]}
/// ```
///
/// Every server started with the same file accepts the tokens any of them issued; changing the
/// secret ends every token issued with the old one, and changing a user's password ends theirs.
public struct SignInUsers: Sendable, Hashable, Codable {
    /// The text the server derives its keys from (HKDF-SHA256): the web auth tokens' key and the
    /// sign-in form's. At least ``minimumSecretLength`` characters, random, kept like a password.
    public var secret: String
    /// The origins (`https://notes.example.com`, a port when it is not the scheme's default) whose
    /// pages the sign-in page may return a browser to with its token; any other `redirect` is
    /// refused, so no one can use the page to send a token elsewhere.
    public var allowedRedirects: [String]
    /// The people who may sign in, each with a login of their own.
    public var users: [User]

    /// The shortest ``secret`` the server accepts.
    public static let minimumSecretLength = 32

    /// A person who may sign in: the userRecordName they act as (the names of the tokens file),
    /// the login they type, and their password's hash.
    public struct User: Sendable, Hashable, Codable {
        /// The user the person acts as once signed in: their private database, their records' stamps.
        public var userRecordName: String
        /// What the person types on the sign-in page (compared exactly; unique in the file).
        public var login: String
        /// The hash the password typed is checked against.
        public var password: PasswordHash

        /// A user entry, as `cloudstore hash-password` prints it.
        public init(userRecordName: String, login: String, password: PasswordHash) {
            self.userRecordName = userRecordName
            self.login = login
            self.password = password
        }
    }

    /// A password as the file keeps it: PBKDF2-HMAC-SHA256 of the password with a salt of its own,
    /// never the password itself. `salt` and `hash` are base64 in the file.
    ///
    /// ```swift
    /// let hash = try SignInUsers.PasswordHash(password: "correct horse battery staple")
    /// hash.matches("correct horse battery staple")   // true
    /// ```
    public struct PasswordHash: Sendable, Hashable, Codable {
        /// The only algorithm: `PBKDF2-HMAC-SHA256`.
        public static let algorithmName = "PBKDF2-HMAC-SHA256"
        /// The iterations a new hash takes: OWASP's advice for PBKDF2-HMAC-SHA256 (2023).
        public static let defaultIterations = 600_000
        /// The iterations the server accepts: fewer is too cheap to guess, more too slow to check.
        public static let iterationRange = 1_000...10_000_000

        /// ``algorithmName``; the server refuses any other.
        public var algorithm: String
        /// PBKDF2's iterations, within ``iterationRange``.
        public var iterations: Int
        /// Random bytes of this password alone (16 from ``init(password:iterations:)``; 8 at least).
        public var salt: Data
        /// The derived key (32 bytes from ``init(password:iterations:)``; 16 at least).
        public var hash: Data

        /// A hash as the file holds it.
        public init(algorithm: String = algorithmName, iterations: Int, salt: Data, hash: Data) {
            self.algorithm = algorithm
            self.iterations = iterations
            self.salt = salt
            self.hash = hash
        }

        /// Hashes `password` with a new random 16-byte salt.
        ///
        /// - Throws: when PBKDF2 fails (an iteration count it cannot take).
        public init(password: String, iterations: Int = defaultIterations) throws {
            let salt = Data(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) })
            self.init(iterations: iterations, salt: salt, hash: Data())
            hash = try derive(password, byteCount: 32)
        }

        /// Whether `password` is the one hashed, compared in constant time. It takes as long as
        /// ``iterations`` make it (a fraction of a second at the default): call it off the
        /// cooperative thread pool.
        public func matches(_ password: String) -> Bool {
            guard let derived = try? derive(password, byteCount: hash.count) else { return false }
            return ConstantTime.equal(derived, hash)
        }

        private func derive(_ password: String, byteCount: Int) throws -> Data {
            let key = try KDF.Insecure.PBKDF2.deriveKey(
                from: Data(password.utf8), salt: salt, using: .sha256, outputByteCount: byteCount,
                unsafeUncheckedRounds: iterations)
            return key.withUnsafeBytes { Data($0) }
        }
    }

    /// Sign-in users with their secret and the origins the sign-in page may return to.
    public init(secret: String, allowedRedirects: [String] = [], users: [User]) {
        self.secret = secret
        self.allowedRedirects = allowedRedirects
        self.users = users
    }

    /// Reads the file's JSON; a missing `secret` reads as empty and `allowedRedirects` as none, so
    /// that ``problem`` can say what to add.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        secret = try container.decodeIfPresent(String.self, forKey: .secret) ?? ""
        allowedRedirects = try container.decodeIfPresent([String].self, forKey: .allowedRedirects) ?? []
        users = try container.decode([User].self, forKey: .users)
    }

    /// What makes these sign-in users unusable, or nil: a short secret, an allowed redirect that
    /// is not an origin, a user name the server keeps for others, a login given twice, a password
    /// hash of another algorithm or with iterations outside ``PasswordHash/iterationRange``.
    public var problem: String? {
        guard secret.utf8.count >= Self.minimumSecretLength else {
            return "the secret is missing or shorter than \(Self.minimumSecretLength) characters: set \"secret\" to a random text, e.g. the output of `openssl rand -base64 32`"
        }
        if let bad = allowedRedirects.first(where: { RedirectOrigin.allowed($0) == nil }) {
            return "allowedRedirects has \"\(bad.prefix(140))\", which is not an origin: write http(s)://host[:port], without a path"
        }
        var logins: Set<String> = []
        for user in users {
            if let problem = ServerConfiguration.userRecordNameProblem(user.userRecordName) { return problem }
            guard !user.login.isEmpty, user.login.utf8.count <= 255, logins.insert(user.login).inserted else {
                return "the login \"\(user.login.prefix(64))\" of user \(user.userRecordName.prefix(64)) is empty, too long or given twice: give every user a login of their own (1 to 255 characters)"
            }
            let password = user.password
            guard password.algorithm == PasswordHash.algorithmName,
                PasswordHash.iterationRange.contains(password.iterations), password.salt.count >= 8,
                password.hash.count >= 16
            else {
                return "the password of login \(user.login.prefix(64)) is not a \(PasswordHash.algorithmName) hash with \(PasswordHash.iterationRange.lowerBound) to \(PasswordHash.iterationRange.upperBound) iterations and a salt of 8 bytes or more: make it again with `cloudstore hash-password`"
            }
        }
        return nil
    }
}
