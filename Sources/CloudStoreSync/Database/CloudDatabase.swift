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

    func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse
    func listZones() async throws -> ZonesResponse
    func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse
    func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse
    func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse
    func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse
    func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse
    func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse
    /// Long-polls until the database changes after `since` (a database token) or `timeout` passes.
    func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse
    /// Who the credentials belong to.
    func caller() async throws -> CallerResponse
    func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema
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
}

/// Why a request to a ``CloudDatabase`` failed as a whole.
public struct CloudError: Error, Sendable, CustomStringConvertible {
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

    public var kind: Kind
    /// The HTTP status, when a response arrived.
    public var httpStatus: Int?
    public var message: String

    public init(_ kind: Kind, httpStatus: Int? = nil, message: String) {
        self.kind = kind
        self.httpStatus = httpStatus
        self.message = message
    }

    public static func server(_ error: ServerError, httpStatus: Int) -> CloudError {
        CloudError(.server(error), httpStatus: httpStatus, message: error.description)
    }

    /// The server's error, if the server answered with one.
    public var serverError: ServerError? {
        if case .server(let error) = kind { return error }
        return nil
    }

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
