import Foundation

/// The parts of CloudKit's server-to-server request signature that need no cryptography.
///
/// The signature is base64(DER(ECDSA-P256-SHA256(message))) with
/// `message = "<ISO8601 date>:<base64(sha256(body))>:<subpath>"`, the subpath being the URL's path
/// with its query string as sent (or the path alone, which the server also accepts); the signer and the
/// verifier hash the body and sign or verify with their crypto library, and agree on the rest here.
public enum ServerToServerSignature {
    /// How far a request's date may be from the server clock, in seconds.
    public static let allowedClockSkew: TimeInterval = 600

    /// The string that is signed.
    public static func message(date: String, bodySHA256Base64: String, path: String) -> String {
        "\(date):\(bodySHA256Base64):\(path)"
    }

    /// `2026-01-25T22:15:43Z`: ISO 8601 in UTC without fractional seconds.
    public static func dateString(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
    }

    /// Parses a date in the format of ``dateString(_:)``; nil when it is malformed.
    public static func date(from string: String) -> Date? {
        try? Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!).parse(string)
    }
}
