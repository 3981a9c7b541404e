import Crypto
import Foundation
import Hummingbird

/// How a person stays signed in to the console after giving the operator token once: a cookie
/// holding HMAC-SHA256(key: operator token, "cloudstore-console") in base64url, never the token
/// itself. It is `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends
/// it) and scoped to `/console`; it is checked in constant time, and it stops working when the
/// operator token changes.
///
/// ```swift
/// let session = ConsoleSession(operatorToken: "s3cret")
/// var response = Response(status: .seeOther, headers: [.location: "/console"])
/// response.setCookie(session.signedInCookie)
/// session.isValid(cookie: session.signedInCookie.value)   // true
/// ```
struct ConsoleSession: Sendable {
    static let cookieName = "cloudstore_console"
    private static let message = Data("cloudstore-console".utf8)

    private let key: SymmetricKey

    init(operatorToken: String) {
        key = SymmetricKey(data: Data(operatorToken.utf8))
    }

    /// The cookie a successful sign-in sets: it lasts as long as the browser keeps it.
    var signedInCookie: Cookie {
        let code = Data(HMAC<SHA256>.authenticationCode(for: Self.message, using: key))
        return Cookie(name: Self.cookieName, value: Base64URL.encode(code), path: "/console", httpOnly: true, sameSite: .strict)
    }

    /// The cookie sign-out sets: empty and already expired, so the browser drops it.
    static var signedOutCookie: Cookie {
        Cookie(
            name: cookieName, value: "", expires: Date(timeIntervalSince1970: 0), maxAge: 0, path: "/console",
            httpOnly: true, sameSite: .strict)
    }

    /// Whether a cookie's value is the one a sign-in set with the current operator token.
    func isValid(cookie value: String) -> Bool {
        guard value.utf8.count <= 64, let code = Base64URL.decode(value) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Self.message, using: key)
    }

    /// Where to go after signing in: `next` when it is a path of the console (so a sign-in link
    /// cannot send a person to another site or outside the console), else the overview.
    static func destination(_ next: String?) -> String {
        guard let next, next == "/console" || next.hasPrefix("/console/") || next.hasPrefix("/console?"),
            !next.contains(".."), !next.contains("\\"), !next.contains("//"),
            next.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else { return "/console" }
        return next
    }
}
