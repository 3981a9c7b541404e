import CloudStoreWire
import Crypto
import Foundation
import Synchronization

/// Asset download URLs as answers carry them (WireProtocol.md §7): absolute, on the origin the
/// request reached (``RequestOrigin``), and their own authority for a while, as Apple's CDN URLs
/// are: a browser's `<img src>`, Foundation's `URLSession` or node's `fetch` gets the bytes with
/// the URL alone.
///
/// A stored record keeps the path (`/database/1/{container}/{environment}/{database}/assets/download/{assetID}`);
/// each answer adds `?ckAssetAccess=<expires>.<caller>.<mac>` for its caller, where `expires` is
/// in seconds since 1970, `caller` the caller's userRecordName in base64url, and `mac` the
/// HMAC-SHA256 of `path \n caller \n expires` under the container's asset URL secret (kept in the
/// storage, the same for every instance: ``ServerStorage/secret(_:container:)``), in base64url.
///
/// A URL presented without credentials acts as the caller it was issued to, for that asset only,
/// until it expires, and only while that caller may still read the asset's zone: the download
/// checks access again (a participant removed from a share is refused at once). With credentials
/// the URL's signature is ignored and the credentials decide, so a device that keeps a record for
/// longer than a URL lives still downloads with its token.
///
/// ```swift
/// let urls = AssetDownloadURLs(origin: "https://cloud.example.com", caller: "_alice", now: now, key: key)
/// urls.url(forPath: "/database/1/iCloud.com.example.notes/development/private/assets/download/0a1b…")
/// // "https://cloud.example.com/database/1/…/assets/download/0a1b…?ckAssetAccess=1796680800.X2FsaWNl.3q2-…"
/// ```
struct AssetDownloadURLs: Sendable {
    /// The query parameter that carries the access.
    static let parameter = "ckAssetAccess"
    /// The name of the secret in the storage.
    static let secretName = "asset-download-urls"
    /// How long a URL lasts at least; expiries are rounded up to the next whole period, so the
    /// URLs of one asset for one caller stay the same within it (caches keep working), and a URL
    /// lasts between one and two periods.
    static let lifetime: Int64 = 3600

    /// `scheme://host[:port]`, or nil when the request named no plain host (the URLs stay paths).
    var origin: String?
    /// The userRecordName the URLs act as.
    var caller: String
    /// Seconds since 1970 after which the URLs are refused.
    var expires: Int64
    var key: SymmetricKey

    init(origin: String?, caller: String, now: Date, key: SymmetricKey) {
        self.origin = origin
        self.caller = caller
        let seconds = Int64(now.timeIntervalSince1970.rounded(.down))
        expires = (seconds / Self.lifetime + 2) * Self.lifetime
        self.key = key
    }

    /// The URL a stored download path is answered as.
    func url(forPath path: String) -> String {
        let access = "\(expires).\(Base64URL.encode(Data(caller.utf8))).\(Self.mac(path: path, caller: caller, expires: expires, key: key))"
        return (origin ?? "") + path + "?\(Self.parameter)=" + access
    }

    /// The caller a presented access admits to `path` at `now`, or the reason it admits no one.
    static func caller(presenting access: String, path: String, now: Date, key: SymmetricKey) -> Result<String, Refusal> {
        let parts = access.split(separator: ".", omittingEmptySubsequences: false)
        guard access.utf8.count <= 1024, parts.count == 3, let expires = Int64(parts[0]),
            let callerBytes = Base64URL.decode(parts[1]), let caller = String(data: callerBytes, encoding: .utf8),
            let presentedMAC = Base64URL.decode(parts[2])
        else { return .failure(.malformed) }
        guard let expected = Base64URL.decode(mac(path: path, caller: caller, expires: expires, key: key)),
            ConstantTime.equal(presentedMAC, expected)
        else { return .failure(.forged) }
        guard Double(expires) > now.timeIntervalSince1970 else { return .failure(.expired) }
        return .success(caller)
    }

    /// Why a presented access admits no one.
    enum Refusal: Error, Hashable {
        /// Not three parts, or not their encodings.
        case malformed
        /// The MAC does not verify: altered, for another asset or caller, or of another secret.
        case forged
        case expired

        var reason: String {
            switch self {
            case .malformed, .forged:
                "this download URL's \(AssetDownloadURLs.parameter) is not one this server issued for this asset: look the record up again for its current downloadURL"
            case .expired:
                "this download URL expired: look the record up again for a current downloadURL (they last at least an hour)"
            }
        }
    }

    private static func mac(path: String, caller: String, expires: Int64, key: SymmetricKey) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data("\(path)\n\(caller)\n\(expires)".utf8), using: key)))
    }
}

extension AssetDownloadURLs {
    /// A record as answered: each asset's stored download path made this answer's URL.
    func presenting(_ record: Record) -> Record {
        guard record.fields.values.contains(where: \.holdsAsset) else { return record }
        var record = record
        record.fields = record.fields.mapValues(presenting)
        return record
    }

    private func presenting(_ value: FieldValue) -> FieldValue {
        switch value {
        case .asset(var asset):
            if let path = asset.downloadURL, path.hasPrefix("/") { asset.downloadURL = url(forPath: path) }
            return .asset(asset)
        case .list(let values) where values.contains(where: \.holdsAsset):
            return .list(values.map(presenting))
        default:
            return value
        }
    }

    /// Appends a stored record's `fields` JSON with each `"downloadURL":"<path>"` made this
    /// answer's URL; the rest as it is. Only an asset's value has a `downloadURL` member whose value
    /// is a string (a field of that name holds an object), and a JSON string cannot hold an
    /// unescaped quote, so the pattern finds exactly the download URLs.
    func appendFields(_ fields: Slice<UnsafeBufferPointer<UInt8>>, to json: inout JSONBytes) {
        let pattern = Array(#""downloadURL":""#.utf8)
        var copied = fields.startIndex
        var index = fields.startIndex
        while let match = Self.find(pattern, in: fields, from: index) {
            let valueStart = match + pattern.count
            guard let valueEnd = fields[valueStart...].firstIndex(of: UInt8(ascii: "\"")) else { break }
            index = valueEnd + 1
            // Paths this server writes hold no escapes, but an encoder may have written `\/`.
            let raw = fields[valueStart..<valueEnd]
            let path = String(decoding: raw, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/")
            guard path.hasPrefix("/"), !path.contains("\\") else { continue }
            json.raw(fields[copied..<(valueStart - 1)])
            json.string(url(forPath: path))
            copied = valueEnd + 1
        }
        json.raw(fields[copied...])
    }

    private static func find(_ pattern: [UInt8], in bytes: Slice<UnsafeBufferPointer<UInt8>>, from start: Int) -> Int? {
        guard let first = pattern.first, bytes.endIndex - start >= pattern.count else { return nil }
        var index = start
        while index <= bytes.endIndex - pattern.count {
            if bytes[index] == first, bytes[index..<(index + pattern.count)].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }
}

extension FieldValue {
    fileprivate var holdsAsset: Bool {
        switch self {
        case .asset: true
        case .list(let values): values.contains(where: \.holdsAsset)
        default: false
        }
    }
}

/// The asset URL key of each container, read from the storage the first time it is needed; nil
/// from storage that plays a release before download URLs were signed.
final class AssetURLKeys: Sendable {
    private let keys = Mutex<[String: SymmetricKey]>([:])

    func key(_ container: String, storage: any ServerStorage) async throws -> SymmetricKey? {
        if let key = keys.withLock({ $0[container] }) { return key }
        guard let secret = try await storage.secret(AssetDownloadURLs.secretName, container: container) else { return nil }
        let key = SymmetricKey(data: secret)
        keys.withLock { $0[container] = key }
        return key
    }
}
