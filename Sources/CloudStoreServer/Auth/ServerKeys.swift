import CloudStoreWire
import Crypto
import Foundation

/// The server-to-server keys the server accepts, and the check of CloudKit's request signature.
///
/// A signed request carries `X-Apple-CloudKit-Request-KeyID`, `-ISO8601Date` and `-SignatureV1`;
/// the signature is base64(DER(ECDSA-P256-SHA256(`date:base64(sha256(body)):subpath`))) where
/// `subpath` is what follows the host: the path with the query string as sent (CloudKit JS signs
/// its `?ckjsBuildVersion=…&ckjsVersion=…`, and signing libraries sign the URL they send), or the
/// path alone; a request without a body may sign an empty hash instead. A request dated more than
/// ten minutes from the server clock is refused.
struct ServerKeys: Sendable {
    private let keys: [String: P256.Signing.PublicKey]

    /// Parses each PEM; the error names the key that is not a P-256 public key.
    init(_ pems: [String: String]) throws(ServerConfigurationError) {
        var keys: [String: P256.Signing.PublicKey] = [:]
        for (keyID, pem) in pems {
            do {
                keys[keyID] = try Self.publicKey(pem: pem)
            } catch {
                throw ServerConfigurationError(
                    "server key \(keyID) is not a P-256 public key in PEM: make one with "
                        + "`openssl ecparam -name prime256v1 -genkey -noout -out key.pem` and "
                        + "`openssl ec -in key.pem -pubout`")
            }
        }
        self.keys = keys
    }

    /// A P-256 public key from PEM in any valid layout: base64 lines of any width (64 columns as
    /// OpenSSL writes them, 76 as python-ecdsa does, or one line), CRLF line ends, surrounding
    /// whitespace; `PUBLIC KEY` (SubjectPublicKeyInfo) only.
    static func publicKey(pem: String) throws -> P256.Signing.PublicKey {
        let lines = pem.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(of: "-----BEGIN PUBLIC KEY-----"),
            let end = lines.firstIndex(of: "-----END PUBLIC KEY-----"), begin < end,
            let der = Data(base64Encoded: lines[(begin + 1)..<end].joined())
        else { throw ServerConfigurationError("not a PEM public key") }
        return try P256.Signing.PublicKey(derRepresentation: der)
    }

    /// The headers of a signed request.
    struct Signature: Sendable {
        var keyID: String
        var date: String?
        var signature: String?
    }

    /// Checks a signed request; answers the key ID, or throws 401 `AUTHENTICATION_FAILED` with a
    /// reason that names the problem but never echoes the signature.
    ///
    /// - Parameters:
    ///   - path: the request's path as sent (percent-encoded).
    ///   - query: the request's query string as sent, without its `?`; nil when it has none.
    func verify(_ signature: Signature, body: [UInt8], path: String, query: String?, now: Date) throws(APIError) -> String {
        guard let key = keys[signature.keyID] else {
            throw APIError(.authenticationFailed, "unknown server-to-server key ID")
        }
        guard let dateText = signature.date, let signatureText = signature.signature else {
            throw APIError(
                .authenticationFailed,
                "a signed request needs \(WireHeader.date) and \(WireHeader.signature) headers")
        }
        guard let date = ServerToServerSignature.date(from: dateText) else {
            throw APIError(.authenticationFailed, "\(WireHeader.date) is not an ISO 8601 date like 2026-01-25T22:15:43Z")
        }
        guard abs(date.timeIntervalSince(now)) <= ServerToServerSignature.allowedClockSkew else {
            throw APIError(
                .authenticationFailed,
                "the request is dated more than 10 minutes from the server clock: sign it again with the current time")
        }
        guard let der = Data(base64Encoded: signatureText),
            let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: der),
            Self.subpaths(path: path, query: query).contains(where: { subpath in
                Self.bodyHashes(body).contains(where: { bodyHash in
                    let message = ServerToServerSignature.message(date: dateText, bodySHA256Base64: bodyHash, path: subpath)
                    return key.isValidSignature(ecdsa, for: Data(message.utf8))
                })
            })
        else {
            throw APIError(.authenticationFailed, "the request signature does not verify")
        }
        return signature.keyID
    }

    /// The subpaths a signature may cover: the path with the query as sent, then the path alone.
    /// A signature over another query verifies under neither.
    static func subpaths(path: String, query: String?) -> [String] {
        guard let query, !query.isEmpty else { return [path] }
        return [path + "?" + query, path]
    }

    /// The body hashes a signature may cover: base64(sha256(body)); for a request without a body
    /// also the empty string, which clients that hash no body at all sign (MistKit does, for GET).
    /// Either way the date and path are signed, so accepting both forms admits nothing unsigned.
    static func bodyHashes(_ body: [UInt8]) -> [String] {
        let hash = Data(SHA256.hash(data: body)).base64EncodedString()
        return body.isEmpty ? [hash, ""] : [hash]
    }
}
