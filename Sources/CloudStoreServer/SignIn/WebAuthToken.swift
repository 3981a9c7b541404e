import Crypto
import Foundation

/// A web auth token the sign-in page issues (`ckWebAuthToken`): `<payload>.<mac>`, both base64url,
/// where the payload is the JSON `{"c": container, "e": expiry in seconds since 1970, "k": the
/// user's credential stamp, "u": userRecordName}` and the MAC is HMAC-SHA256 of the payload's text
/// under the token key (``SignInAuthority``; HKDF of the sign-in users file's secret).
///
/// Stateless: the server stores nothing, and every server with the same secret checks any of
/// their tokens. The credential stamp changes with the user's password hash, so a new password
/// ends the tokens issued with the old one.
///
/// ```swift
/// let token = WebAuthToken(container: "iCloud.com.example.notes", userRecordName: "_alice", expires: 1_800_086_400, credential: stamp)
/// let text = token.signed(with: key)
/// WebAuthToken.verified(text, key: key)   // .valid(token)
/// ```
struct WebAuthToken: Hashable, Sendable, Codable {
    var container: String
    var userRecordName: String
    /// Seconds since 1970 after which the token is refused.
    var expires: Int64
    /// The stamp of the user's password hashes when the token was issued (``SignInAuthority``).
    var credential: String

    private enum CodingKeys: String, CodingKey {
        case container = "c", userRecordName = "u", expires = "e", credential = "k"
    }

    /// What a presented token turned out to be.
    enum Verification: Hashable, Sendable {
        /// Not shaped like a web auth token (two base64url parts): perhaps a bearer token.
        case notAToken
        /// Shaped like one, but its MAC does not verify under this key, or its payload is not one.
        case forged
        case valid(WebAuthToken)
    }

    /// The token's text: the payload and its MAC.
    func signed(with key: SymmetricKey) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Encoding four plain values cannot fail.
        let payload = Base64URL.encode((try? encoder.encode(self)) ?? Data())
        return payload + "." + Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data(payload.utf8), using: key)))
    }

    /// Checks a token's MAC (in constant time) before reading anything in it.
    static func verified(_ text: String, key: SymmetricKey) -> Verification {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= 2048, parts.count == 2, let payload = Base64URL.decode(parts[0]),
            let mac = Base64URL.decode(parts[1])
        else { return .notAToken }
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: Data(parts[0].utf8), using: key),
            let token = try? JSONDecoder().decode(WebAuthToken.self, from: payload)
        else { return .forged }
        return .valid(token)
    }

    /// Why a verified token does not admit its user to `container` at `now`, or nil when it does.
    /// `credential` is the user's current credential stamp, nil when they may no longer sign in.
    func refusal(container: String, now: Date, credential: String?) -> String? {
        if Double(expires) <= now.timeIntervalSince1970 {
            let expiry = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(expires)))
            return "the web auth token expired at \(expiry): sign in again"
        }
        if self.container != container {
            return "the web auth token was issued for another container: sign in again on container \(container)'s sign-in page"
        }
        guard let credential, ConstantTime.equal(Data(credential.utf8), Data(self.credential.utf8)) else {
            return "the web auth token's user may no longer sign in, or their password changed: sign in again"
        }
        return nil
    }
}
