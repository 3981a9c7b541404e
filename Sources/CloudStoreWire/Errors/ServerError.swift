import Foundation

/// An error as the server reports it, for a whole request or for one item of it.
///
/// Request-level: a non-2xx response whose body is
/// `{"uuid", "serverErrorCode", "reason", "retryAfter"?, "redirectURL"?}`. Per item: the same keys
/// plus `recordName` or `zoneID`; a `CONFLICT` also carries the server's current copy in
/// `serverRecord` (ext).
public struct ServerError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    public var uuid: String?
    public var serverErrorCode: ServerErrorCode
    public var reason: String?
    /// Seconds to wait before retrying.
    public var retryAfter: Double?
    /// On 421 `AUTHENTICATION_REQUIRED`, where the user signs in: a page that returns a
    /// `ckWebAuthToken` (<doc:WireProtocol> §1). Absent when the server has no sign-in page.
    public var redirectURL: String?
    public var recordName: String?
    public var zoneID: ZoneID?
    /// The subscription an item of `subscriptions/lookup` or `subscriptions/modify` is about.
    public var subscriptionID: String?
    /// (ext) On `CONFLICT` and `EXISTS`: the record as the server has it now.
    public var serverRecord: Record?

    public init(
        _ code: ServerErrorCode, reason: String? = nil, retryAfter: Double? = nil, recordName: String? = nil,
        zoneID: ZoneID? = nil, serverRecord: Record? = nil, uuid: String? = nil, redirectURL: String? = nil
    ) {
        self.serverErrorCode = code
        self.reason = reason
        self.retryAfter = retryAfter
        self.recordName = recordName
        self.zoneID = zoneID
        self.serverRecord = serverRecord
        self.uuid = uuid
        self.redirectURL = redirectURL
    }

    /// A per-item error naming a subscription.
    public init(_ code: ServerErrorCode, reason: String, subscriptionID: String) {
        self.init(code, reason: reason)
        self.subscriptionID = subscriptionID
    }

    public var code: ServerErrorCode { serverErrorCode }

    public var description: String {
        var text = serverErrorCode.rawValue
        if let recordName {
            text += " (record \(recordName))"
        } else if let zoneID {
            text += " (zone \(zoneID))"
        } else if let subscriptionID {
            text += " (subscription \(subscriptionID))"
        }
        if let reason { text += ": \(reason)" }
        if let retryAfter { text += ", retry after \(retryAfter)s" }
        return text
    }
}
