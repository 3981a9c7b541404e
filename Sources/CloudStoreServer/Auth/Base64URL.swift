import Foundation

/// Base64 with the URL's alphabet (`-` and `_` for `+` and `/`) and no padding (RFC 4648 §5):
/// text that goes into cookies, query strings and paths as it is.
///
/// ```swift
/// Base64URL.encode(Data([0xFB, 0xFF]))   // "-_8"
/// Base64URL.decode("-_8")                // Data([0xFB, 0xFF])
/// ```
enum Base64URL {
    static func encode(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes of `text`, or nil when it is not base64url (padding, `+`, `/` or spaces included).
    static func decode(_ text: some StringProtocol) -> Data? {
        guard text.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") })
        else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
