import CloudStoreWire
import Foundation

/// The limits of WireProtocol.md §5, each configurable.
///
/// ```swift
/// var limits = ServerLimits()
/// limits.requestsPerSecondPerUser = 20   // answer 429 THROTTLED above 20 requests per second
/// limits.maxBodyBytes = 1 << 20
/// ```
public struct ServerLimits: Hashable, Sendable {
    /// Operations in one `records/modify` or `zones/modify` (and items in one lookup); above it the
    /// request answers 413 `LIMIT_EXCEEDED`.
    public var maxOperations: Int
    /// Records (or zones) in one response page; a larger `resultsLimit` is clamped to it.
    public var maxResultsLimit: Int
    /// A request body above it answers 413 `LIMIT_EXCEEDED`; the server never reads more than this.
    public var maxBodyBytes: Int
    /// One record's fields, JSON-encoded; above it the record fails with `LIMIT_EXCEEDED`.
    public var maxRecordBytes: Int
    /// Requests per second one caller may make (a token bucket with one second of burst), or nil
    /// for no limit. Above it the request answers 429 `THROTTLED` with `retryAfter`.
    public var requestsPerSecondPerUser: Double?
    /// How long tombstones are kept. A zone token older than the tombstones purged after this
    /// answers 410 `CHANGE_TOKEN_EXPIRED`.
    public var tombstoneHorizon: TimeInterval
    /// The longest a long poll on `notifications` may wait.
    public var maxLongPollSeconds: Double
    /// Seconds a connection may stay open without a request in progress (between keep-alive
    /// requests, or while its first request's head has not fully arrived) before the server
    /// closes it. A long poll is a request in progress, never idle.
    public var idleTimeoutSeconds: Double
    /// Seconds a request's body may take to arrive; a slower one answers 400 and its connection
    /// closes.
    public var bodyTimeoutSeconds: Double
    /// Open connections at most (lowered to fit the process's descriptor limit). A new connection
    /// beyond it closes the connection idle longest, so idle connections held by one client cannot
    /// lock others out.
    public var maxConnections: Int
    /// One asset's bytes (WireProtocol.md §7); a larger upload answers 413 `LIMIT_EXCEEDED` (before
    /// reading when its `Content-Length` says so, else as soon as it passes the limit).
    public var assetBytes: Int64
    /// How long a web auth token from the sign-in page lasts (``SignInUsers``); after it a request
    /// with the token answers 401 `AUTHENTICATION_FAILED`, and the user signs in again.
    public var webAuthTokenLifetime: TimeInterval

    public init(
        maxOperations: Int = 200, maxResultsLimit: Int = 200, maxBodyBytes: Int = 4 << 20,
        maxRecordBytes: Int = 1 << 20, requestsPerSecondPerUser: Double? = nil,
        tombstoneHorizon: TimeInterval = 30 * 24 * 3600, maxLongPollSeconds: Double = 60,
        idleTimeoutSeconds: Double = 75, bodyTimeoutSeconds: Double = 60, maxConnections: Int = 1000,
        assetBytes: Int64 = 250 << 20, webAuthTokenLifetime: TimeInterval = 24 * 3600
    ) {
        self.maxOperations = maxOperations
        self.maxResultsLimit = maxResultsLimit
        self.maxBodyBytes = maxBodyBytes
        self.maxRecordBytes = maxRecordBytes
        self.requestsPerSecondPerUser = requestsPerSecondPerUser
        self.tombstoneHorizon = tombstoneHorizon
        self.maxLongPollSeconds = maxLongPollSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.bodyTimeoutSeconds = bodyTimeoutSeconds
        self.maxConnections = maxConnections
        self.assetBytes = assetBytes
        self.webAuthTokenLifetime = webAuthTokenLifetime
    }

    /// Throws when a limit cannot work (zero pages, no body, a rate of zero), naming it.
    func validate() throws(ServerConfigurationError) {
        let positive: [(String, Double)] = [
            ("maxOperations", Double(maxOperations)), ("maxResultsLimit", Double(maxResultsLimit)),
            ("maxBodyBytes", Double(maxBodyBytes)), ("maxRecordBytes", Double(maxRecordBytes)),
            ("requestsPerSecondPerUser", requestsPerSecondPerUser ?? 1), ("tombstoneHorizon", tombstoneHorizon),
            ("maxLongPollSeconds", maxLongPollSeconds), ("idleTimeoutSeconds", idleTimeoutSeconds),
            ("bodyTimeoutSeconds", bodyTimeoutSeconds), ("maxConnections", Double(maxConnections)),
            ("assetBytes", Double(assetBytes)), ("webAuthTokenLifetime", webAuthTokenLifetime),
        ]
        if let (name, value) = positive.first(where: { !($0.1 > 0) }) {
            throw ServerConfigurationError("limit \(name) must be above 0; it is \(value)")
        }
    }

    /// The page size for a requested `resultsLimit`: absent means the maximum, a larger one is
    /// clamped to the maximum, and zero or a negative number is a bad request.
    func pageSize(_ requested: Int?, field: String = "resultsLimit") throws(APIError) -> Int {
        guard let requested else { return maxResultsLimit }
        guard requested > 0 else {
            throw APIError(.badRequest, "\(field) must be at least 1; it was \(requested)")
        }
        return min(requested, maxResultsLimit)
    }

    /// Throws 413 `LIMIT_EXCEEDED` when a request carries more items than ``maxOperations``.
    func checkOperationCount(_ count: Int, of what: String) throws(APIError) {
        guard count <= maxOperations else {
            throw APIError(
                .limitExceeded,
                "\(count) \(what) in one request; the limit is \(maxOperations): split the request")
        }
    }
}
