import CloudStoreWire
import Foundation

/// One database of a cloud container (private, shared or public), as the sync engine talks to it.
///
/// ``HTTPCloudDatabase`` talks to a `cloudstore serve` (or any server that follows WireProtocol.md)
/// over HTTP; tests wrap a database to inject faults. Every method sends one request: a non-2xx
/// answer throws ``CloudError`` with the server's error, per-item failures come back as data in
/// the response.
public protocol CloudDatabase: Sendable {
    /// Which database of the container this is.
    var scope: DatabaseScope { get }

    /// `POST zones/modify`: creates and deletes zones; one result per operation, in order.
    /// Creating a zone that exists succeeds.
    func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse
    /// `GET zones/list`: every zone of the database.
    func listZones() async throws -> ZonesResponse
    /// `POST zones/lookup`: the named zones, each a zone or an error such as `ZONE_NOT_FOUND`.
    func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse
    /// `POST records/modify`: saves and deletes records of one zone; one result per operation, in
    /// order. A failed atomic request returns its per-record results (the culprit's error, and
    /// `ATOMIC_ERROR` for the others) instead of throwing.
    func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse
    /// `POST records/lookup`: the named records, each a record or an error such as `NOT_FOUND`.
    func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse
    /// `POST records/query`: one page of the records of a type that match the filters, with a
    /// continuation marker when more follow. A query is not a way to sync: use the changes calls.
    func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse
    /// `POST changes/database`: one page of the zones changed or deleted since the request's
    /// database token (every zone without one), and the token to ask with next.
    func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse
    /// `POST changes/zone`: per zone asked for, one page of the records changed or deleted since
    /// its token (every live record without one) and the token to ask with next. A token older
    /// than the server's tombstone horizon throws a ``CloudError`` with `CHANGE_TOKEN_EXPIRED`.
    func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse
    /// Long-polls until the database changes after `since` (a database token) or `timeout` passes.
    func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse
    /// Long-polls as ``waitForChanges(since:timeout:)``, naming the zone tokens the caller holds
    /// (at most `NotificationsResponse.maxZoneTokens`), so the answer may carry those zones' first
    /// pages of changes (`NotificationsResponse.zoneChanges`, WireProtocol.md §3, Push).
    /// The default ignores `zoneTokens`.
    func waitForChanges(since syncToken: String?, zoneTokens: [String], timeout: Duration) async throws
        -> NotificationsResponse
    /// Who the credentials belong to.
    func caller() async throws -> CallerResponse
    /// `POST schema/modify`: adds the record types and fields of `schema` to the container's
    /// schema and returns the schema as it now is, with its version. In `production`, changes must
    /// be additive.
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema
    /// `GET schema`: the container's record types and fields, with the schema's version.
    func fetchSchema() async throws -> CloudSchema

    /// `POST assets/upload`: an upload URL for each asset field about to be saved.
    func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse
    /// Posts the bytes of `file` to an upload URL from ``requestAssetUploads(_:)``, streamed (the
    /// file is never read into memory whole). `url` may be relative to the server.
    func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult
    /// Gets an asset's bytes from its `downloadURL` into `file`, streamed. With `offset` above 0,
    /// asks for the bytes from there on (`Range`) and appends them to the `offset` bytes `file`
    /// already holds; a server that answers with the whole asset instead makes the file start over.
    func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws

    /// `POST /public/records/accept`: joins the shares these short GUIDs name (WireProtocol.md §6),
    /// whatever database this is; each result is the share and its zone, or why not.
    func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse
    /// `POST /public/records/resolve`: what accepting would give (the share, its owner, the
    /// caller's permission), without joining.
    func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse

    /// `POST subscriptions/modify`: creates, updates and deletes the caller's subscriptions to
    /// this database (WireProtocol.md §8); one result per operation, in order.
    func modifySubscriptions(_ request: SubscriptionsModifyRequest) async throws -> SubscriptionsResponse
}

extension CloudDatabase {
    /// Long-polls with ``waitForChanges(since:timeout:)``, naming no zone: a database that cannot
    /// carry zone pages in its answer needs nothing more.
    public func waitForChanges(since syncToken: String?, zoneTokens: [String], timeout: Duration) async throws
        -> NotificationsResponse
    {
        try await waitForChanges(since: syncToken, timeout: timeout)
    }

    /// A database that keeps no subscriptions: every request throws.
    public func modifySubscriptions(_ request: SubscriptionsModifyRequest) async throws -> SubscriptionsResponse {
        throw CloudError(.invalidResponse, message: "this database does not keep subscriptions")
    }
}

/// Why a request to a ``CloudDatabase`` failed as a whole.
public struct CloudError: Error, Sendable, CustomStringConvertible {
    /// How the request failed: the server's error, or no usable answer.
    public enum Kind: Sendable, Equatable {
        /// The server answered with a non-2xx status and an error body.
        case server(ServerError)
        /// The connection failed or was cut before a whole response arrived.
        case network
        /// No response within the request timeout.
        case timeout
        /// The server answered with something that is not a valid response.
        case invalidResponse
        /// The request was cancelled.
        case cancelled
    }

    /// How the request failed.
    public var kind: Kind
    /// The HTTP status, when a response arrived.
    public var httpStatus: Int?
    /// What went wrong, for logs and people: the server's error, or the request and the cause.
    public var message: String

    /// Makes an error of `kind`; ``server(_:httpStatus:)`` makes one from a server's answer.
    public init(_ kind: Kind, httpStatus: Int? = nil, message: String) {
        self.kind = kind
        self.httpStatus = httpStatus
        self.message = message
    }

    /// The error of a server's non-2xx answer, its message the server's error.
    public static func server(_ error: ServerError, httpStatus: Int) -> CloudError {
        CloudError(.server(error), httpStatus: httpStatus, message: error.description)
    }

    /// The server's error, if the server answered with one.
    public var serverError: ServerError? {
        if case .server(let error) = kind { return error }
        return nil
    }

    /// The server's error code (`CONFLICT`, `ZONE_NOT_FOUND`, …); nil when no server error arrived.
    public var code: ServerErrorCode? { serverError?.serverErrorCode }

    /// Whether the same request may succeed later: network failures, timeouts, 429, 503, 500.
    public var isTransient: Bool {
        switch kind {
        case .network, .timeout: true
        case .server(let error): error.serverErrorCode.isTransient
        case .invalidResponse, .cancelled: false
        }
    }

    /// Seconds the server asked the client to wait.
    public var retryAfter: Double? { serverError?.retryAfter }

    /// The message, after the HTTP status when a response arrived (`HTTP 503: …`).
    public var description: String {
        if let httpStatus { return "HTTP \(httpStatus): \(message)" }
        return message
    }
}

/// A database that sends a `records/modify` request already encoded: the engine encodes each
/// operation once, to size its requests, and sends those bytes.
package protocol EncodedRecordsModifying: CloudDatabase {
    /// ``CloudDatabase/modifyRecords(_:)`` with `body`, the bytes `WireCoding.encode(request)` gives.
    func modifyRecords(_ request: RecordsModifyRequest, encoded body: Data) async throws -> RecordsResponse
}

extension CloudDatabase {
    /// Sends `request` as `body` when the database takes encoded requests, encoding it otherwise.
    package func modifyRecords(_ request: RecordsModifyRequest, encodedAs body: Data?) async throws -> RecordsResponse {
        if let body, let database = self as? any EncodedRecordsModifying {
            return try await database.modifyRecords(request, encoded: body)
        }
        return try await modifyRecords(request)
    }
}
