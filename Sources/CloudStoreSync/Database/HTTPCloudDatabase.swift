import AsyncHTTPClient
import CloudStoreLogging
import CloudStoreWire
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// A ``CloudDatabase`` on a server that speaks the wire protocol of `CloudStoreWire`
/// (WireProtocol.md; `cloudstore serve`), over HTTP.
///
/// Each call is one request with a timeout. A non-2xx answer throws ``CloudError`` with the
/// server's error (`retryAfter` filled from `Retry-After` when the body has none); a failed or
/// cut connection throws `.network`, a request over its timeout `.timeout`, a body that is not a
/// valid answer `.invalidResponse`. An atomic `records/modify` that failed (HTTP 400 with a
/// `records` array) is not thrown: it returns its per-record results like any other answer.
///
/// ```swift
/// let database = HTTPCloudDatabase(
///     baseURL: URL(string: "http://127.0.0.1:8080")!, container: "iCloud.com.example.notes",
///     environment: .development, scope: .private, token: userToken, deviceID: "ipad-7")
/// let zones = try await database.listZones()
/// ```
///
/// Requests are logged at `.info` (method, path, status, duration); bodies at `.trace`. The
/// bearer token never appears in logs or errors.
public struct HTTPCloudDatabase: CloudDatabase, EncodedRecordsModifying {
    /// Which database of the container the requests go to: `private`, `shared` or `public`.
    public let scope: DatabaseScope
    /// The server's root, e.g. `http://127.0.0.1:8080`.
    public let baseURL: String
    /// The container and environment, which make the `/database/1/{container}/{environment}` path.
    public let route: DatabaseRoute
    /// Sent as `X-CloudStore-Device`; the server stamps it into the records this device writes.
    public let deviceID: String
    /// How long one request may take; the long poll gets its own wait on top.
    public let requestTimeout: Duration
    /// Largest response body accepted, in bytes (64 MiB by default); a larger answer fails with
    /// `.invalidResponse`.
    public var maxResponseBytes = 64 * 1024 * 1024
    private let token: String?
    private let httpClient: HTTPClient
    private let logger: Logger
    private let clientInternalsLogger: Logger

    /// Makes a database that sends its requests to the server at `baseURL`, as the user `token`
    /// names, from the device `deviceID`. Nothing is sent until the first call.
    ///
    /// - Parameters:
    ///   - baseURL: the server's root, e.g. `http://127.0.0.1:8080`, without the `/database/1/...` path.
    ///   - container: the container identifier, e.g. `iCloud.com.example.notes`.
    ///   - environment: `development` (the schema grows as records arrive) or `production`.
    ///   - scope: which database of the container: `private` (the user's own), `shared` or `public`.
    ///   - token: the user's bearer token; nil for requests without a user.
    ///   - deviceID: this device's stable identifier, sent as `X-CloudStore-Device`.
    ///   - httpClient: the client to send with; by default ``defaultHTTPClient``.
    ///   - requestTimeout: how long one request may take before it fails with `.timeout`.
    ///   - logger: where requests are logged; by default warnings and errors only.
    public init(
        baseURL: URL, container: String, environment: CloudEnvironment = .development,
        scope: DatabaseScope = .private, token: String?, deviceID: String, httpClient: HTTPClient = HTTPCloudDatabase.defaultHTTPClient,
        requestTimeout: Duration = .seconds(30), logger: Logger = .quiet(label: "cloudstore.http")
    ) {
        var baseURL = baseURL.absoluteString
        while baseURL.hasSuffix("/") { baseURL.removeLast() }
        self.baseURL = baseURL
        self.route = DatabaseRoute(container: container, environment: environment)
        self.scope = scope
        self.token = token
        self.deviceID = deviceID
        self.httpClient = httpClient
        self.requestTimeout = requestTimeout
        self.logger = logger
        clientInternalsLogger = logger.forLibrary("async-http-client")
    }

    /// The process-wide client ``HTTPCloudDatabase`` sends with unless given another: like
    /// `HTTPClient.shared`, except that a refused connection fails at once (within a 5-second
    /// connect timeout) instead of being retried until the request's deadline, so an unreachable
    /// server is reported quickly and the sync engine's back-off takes over.
    public static let defaultHTTPClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = .seconds(5)
        configuration.connectionPool.retryConnectionEstablishment = false
        // Drop idle connections well before a server does (`cloudstore serve` after 75 s), so a
        // request never goes out on a connection the server is closing.
        configuration.connectionPool.idleTimeout = .seconds(30)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    // MARK: CloudDatabase

    public func modifyZones(_ request: ZonesModifyRequest) async throws -> ZonesResponse {
        try await call(.POST, route.path(scope, .zonesModify), body: request)
    }

    public func listZones() async throws -> ZonesResponse {
        try await call(.GET, route.path(scope, .zonesList))
    }

    public func lookupZones(_ request: ZonesLookupRequest) async throws -> ZonesResponse {
        try await call(.POST, route.path(scope, .zonesLookup), body: request)
    }

    public func modifyRecords(_ request: RecordsModifyRequest) async throws -> RecordsResponse {
        try await modifyRecords(request, encoded: try encode(request))
    }

    package func modifyRecords(_ request: RecordsModifyRequest, encoded body: Data) async throws -> RecordsResponse {
        let exchange = try await send(.POST, route.path(scope, .recordsModify), body: body)
        if exchange.status == 400, let atomicFailure = try? WireCoding.decode(RecordsResponse.self, from: exchange.body),
            !atomicFailure.records.isEmpty
        {
            return atomicFailure
        }
        return try decode(exchange)
    }

    public func lookupRecords(_ request: RecordsLookupRequest) async throws -> RecordsResponse {
        try await call(.POST, route.path(scope, .recordsLookup), body: request)
    }

    public func queryRecords(_ request: RecordsQueryRequest) async throws -> RecordsQueryResponse {
        try await call(.POST, route.path(scope, .recordsQuery), body: request)
    }

    public func fetchDatabaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChangesResponse {
        try await call(.POST, route.path(scope, .changesDatabase), body: request)
    }

    public func fetchZoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesResponse {
        try await call(.POST, route.path(scope, .changesZone), body: request)
    }

    public func waitForChanges(since syncToken: String?, timeout: Duration) async throws -> NotificationsResponse {
        try await waitForChanges(since: syncToken, zoneTokens: [], timeout: timeout)
    }

    public func waitForChanges(since syncToken: String?, zoneTokens: [String], timeout: Duration) async throws
        -> NotificationsResponse
    {
        let seconds = max(0, Int((timeout / .seconds(1)).rounded(.up)))
        var query = [("timeout", String(seconds))]
        if let syncToken { query.insert(("since", syncToken), at: 0) }
        if !zoneTokens.isEmpty { query.append(("zones", zoneTokens.joined(separator: ","))) }
        let exchange = try await send(
            .GET, route.path(scope, .notifications), query: query, body: nil, timeout: timeout + requestTimeout)
        return try decode(exchange)
    }

    public func caller() async throws -> CallerResponse {
        try await call(.GET, route.path(.public, .usersCaller))
    }

    public func modifySchema(_ schema: CloudSchema) async throws -> CloudSchema {
        try await call(.POST, route.schemaModifyPath, body: schema)
    }

    public func fetchSchema() async throws -> CloudSchema {
        try await call(.GET, route.schemaPath)
    }

    public func acceptShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse {
        try await call(.POST, route.path(.public, .recordsAccept), body: request)
    }

    public func resolveShares(_ request: ShareAcceptRequest) async throws -> ShareAcceptResponse {
        try await call(.POST, route.path(.public, .recordsResolve), body: request)
    }

    public func modifySubscriptions(_ request: SubscriptionsModifyRequest) async throws -> SubscriptionsResponse {
        try await call(.POST, route.path(scope, .subscriptionsModify), body: request)
    }

    public func requestAssetUploads(_ request: AssetUploadRequest) async throws -> AssetUploadResponse {
        try await call(.POST, route.path(scope, .assetsUpload), body: request)
    }

    /// Streams the file to the upload URL in chunks of 1 MiB with its `Content-Length`. The upload
    /// fails with `.timeout` only when no byte moved for ``requestTimeout``; it has no total deadline.
    public func uploadAsset(from file: URL, to url: String) async throws -> AssetUploadResult {
        let size: Int64
        do {
            size = (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.int64Value ?? 0
        } catch {
            throw CloudError(.invalidResponse, message: "cannot read the asset file \(file.path): \(error.localizedDescription)")
        }
        var request = try transferRequest(.POST, url)
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        let path = Self.path(of: url)
        let progress = TransferProgress()
        request.body = .stream(FileChunks(file: file, progress: progress), length: .known(size))
        let upload = request
        let limit = maxResponseBytes
        let answer = try await withProgressDeadline(.POST, path, progress) { () async throws -> Exchange in
            try await self.exchange(upload, .POST, path, deadline: .distantFuture) {
                (body: HTTPClientResponse.Body) async throws -> ByteBuffer in
                progress.advance()
                return try await body.collect(upTo: limit)
            }
        }
        return try decode(answer)
    }

    /// Streams the answer into the file chunk by chunk: from `offset` with a `Range` request when
    /// the server answers 206, from the start (truncating the file) when it answers 200. The
    /// download fails with `.timeout` only when no byte moved for ``requestTimeout``.
    public func downloadAsset(from url: String, to file: URL, resumingAt offset: Int64) async throws {
        var request = try transferRequest(.GET, url)
        request.headers.add(name: "Accept", value: "application/octet-stream")
        if offset > 0 { request.headers.add(name: "Range", value: "bytes=\(offset)-") }
        let path = Self.path(of: url)
        let progress = TransferProgress()
        let download = request
        let limit = maxResponseBytes
        let answer = try await withProgressDeadline(.GET, path, progress) { () async throws -> Exchange in
            try await self.exchange(download, .GET, path, deadline: .distantFuture) {
                (body: HTTPClientResponse.Body, status: Int, headers: HTTPHeaders) async throws -> ByteBuffer in
                guard status == 200 || status == 206 else { return try await body.collect(upTo: limit) }
                let start = status == 206 ? offset : 0
                if status == 206, headers.first(name: "Content-Range")?.hasPrefix("bytes \(offset)-") != true {
                    throw CloudError(
                        .invalidResponse, httpStatus: status, message: "\(path) answered another range than bytes \(offset)-")
                }
                if !FileManager.default.fileExists(atPath: file.path) {
                    _ = FileManager.default.createFile(atPath: file.path, contents: nil)
                }
                let handle = try FileHandle(forWritingTo: file)
                defer { try? handle.close() }
                try handle.truncate(atOffset: UInt64(start))
                var written: Int64 = 0
                for try await chunk in body {
                    progress.advance()
                    try handle.write(contentsOf: Data(chunk.readableBytesView))
                    written += Int64(chunk.readableBytes)
                }
                if let length = headers.first(name: "Content-Length").flatMap({ Int64($0) }), length != written {
                    throw CloudError(
                        .network, message: "\(path) ended after \(written) of \(length) bytes; resume the download at \(start + written)")
                }
                try handle.synchronize()
                return ByteBuffer()
            }
        }
        guard (200..<300).contains(answer.status) else { throw Self.serverError(from: answer) }
    }

    // MARK: Transport

    struct Exchange {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var path: String
    }

    private func call<Response: Decodable>(_ method: HTTPMethod, _ path: String) async throws(CloudError) -> Response {
        try decode(try await send(method, path, body: nil))
    }

    private func call<Response: Decodable>(_ method: HTTPMethod, _ path: String, body: some Encodable)
        async throws(CloudError) -> Response
    {
        try decode(try await send(method, path, body: try encode(body)))
    }

    private func encode(_ value: some Encodable) throws(CloudError) -> Data {
        do {
            return try WireCoding.encode(value)
        } catch {
            throw CloudError(.invalidResponse, message: "could not encode the request: \(error)")
        }
    }

    /// Sends one request and collects the whole response; throws only when no response arrived.
    private func send(
        _ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: Data?, timeout: Duration? = nil
    ) async throws(CloudError) -> Exchange {
        var url = baseURL + path
        if !query.isEmpty {
            url += "?" + query.map { "\($0.0)=\(Self.percentEncoded($0.1))" }.joined(separator: "&")
        }
        var request = authorizedRequest(method, url)
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
            logger.trace("Request body", metadata: ["path": "\(path)", "body": "\(String(decoding: body, as: UTF8.self))"])
        }
        let effectiveTimeout = timeout ?? requestTimeout
        return try await exchange(request, method, path, deadline: .now() + Self.timeAmount(effectiveTimeout), timeout: effectiveTimeout) {
            body in try await body.collect(upTo: maxResponseBytes)
        }
    }

    /// A request with the device and the bearer token.
    private func authorizedRequest(_ method: HTTPMethod, _ url: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: WireHeader.device, value: deviceID)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        return request
    }

    /// A request to an asset's upload or download URL: a path-absolute reference resolves against
    /// ``baseURL``, and so does an absolute URL on this container's route (the server names itself
    /// by the host it was reached by, which a proxy in front may have rewritten); any other
    /// absolute `http`/`https` URL is used as it is.
    private func transferRequest(_ method: HTTPMethod, _ url: String) throws(CloudError) -> HTTPClientRequest {
        let lowercased = url.lowercased()
        if lowercased.hasPrefix("http://") || lowercased.hasPrefix("https://") {
            if let components = URLComponents(string: url), components.percentEncodedPath.hasPrefix(route.basePath + "/") {
                let query = components.percentEncodedQuery.map { "?" + $0 } ?? ""
                return authorizedRequest(method, baseURL + components.percentEncodedPath + query)
            }
            return authorizedRequest(method, url)
        }
        guard url.hasPrefix("/") else {
            throw CloudError(.invalidResponse, message: "\(url.prefix(200)) is not an asset URL: expected /database/1/… or http(s)://…")
        }
        return authorizedRequest(method, baseURL + url)
    }

    /// The path of an asset URL, for logs and errors.
    private static func path(of url: String) -> String {
        guard !url.hasPrefix("/"), let components = URLComponents(string: url) else { return url }
        return components.path
    }

    private func exchange(
        _ request: HTTPClientRequest, _ method: HTTPMethod, _ path: String, deadline: NIODeadline, timeout: Duration? = nil,
        _ readBody: (HTTPClientResponse.Body) async throws -> ByteBuffer
    ) async throws(CloudError) -> Exchange {
        try await exchange(request, method, path, deadline: deadline, timeout: timeout) { body, _, _ in try await readBody(body) }
    }

    /// Executes a request and hands the response's body, status and headers to `readBody`, whose
    /// answer becomes the exchange's body; logs it, and maps failures to ``CloudError``.
    private func exchange(
        _ request: HTTPClientRequest, _ method: HTTPMethod, _ path: String, deadline: NIODeadline, timeout: Duration? = nil,
        _ readBody: (HTTPClientResponse.Body, Int, HTTPHeaders) async throws -> ByteBuffer
    ) async throws(CloudError) -> Exchange {
        let started = ContinuousClock.now
        let effectiveTimeout = timeout ?? requestTimeout
        do {
            let response: HTTPClientResponse
            do {
                response = try await httpClient.execute(request, deadline: deadline, logger: clientInternalsLogger)
            } catch let error as HTTPClientError where error == .remoteConnectionClosed && Self.onlyReads(method, path) {
                // A pooled connection the peer was closing as the request went out (a server or
                // proxy that restarted, an idle timeout): a request that only reads changes
                // nothing, so it goes once more, on a new connection.
                logger.debug("Connection closed before an answer; sending the request again", metadata: ["path": "\(path)"])
                response = try await httpClient.execute(request, deadline: deadline, logger: clientInternalsLogger)
            }
            let status = Int(response.status.code)
            let buffer = try await readBody(response.body, status, response.headers)
            let data = Data(buffer.readableBytesView)
            logger.info(
                "HTTP request",
                metadata: [
                    "method": "\(method.rawValue)", "path": "\(path)", "status": "\(status)",
                    "duration": "\(LogFormat.duration(ContinuousClock.now - started))",
                ])
            logger.trace("Response body", metadata: ["path": "\(path)", "body": "\(String(decoding: data, as: UTF8.self))"])
            return Exchange(status: status, headers: response.headers, body: data, path: path)
        } catch {
            let cloudError = Self.cloudError(for: error, method: method, path: path, timeout: effectiveTimeout)
            logger.info(
                "HTTP request failed",
                metadata: [
                    "method": "\(method.rawValue)", "path": "\(path)", "error": "\(cloudError)",
                    "duration": "\(LogFormat.duration(ContinuousClock.now - started))",
                ])
            throw cloudError
        }
    }

    /// Whether a request only reads (``DatabaseOperation/onlyReads``): a GET, or a POST that looks
    /// up, queries or fetches changes. Sent twice, it changes nothing.
    package static func onlyReads(_ method: HTTPMethod, _ path: String) -> Bool {
        method == .GET || (DatabaseOperation(pathEnding: path[...])?.onlyReads ?? false)
    }

    /// The body of a 2xx answer, or the error of any other.
    private func decode<Response: Decodable>(_ exchange: Exchange) throws(CloudError) -> Response {
        guard (200..<300).contains(exchange.status) else { throw Self.serverError(from: exchange) }
        do {
            return try WireCoding.decode(Response.self, from: exchange.body)
        } catch {
            throw CloudError(
                .invalidResponse, httpStatus: exchange.status,
                message: "the answer to \(exchange.path) is not a valid \(Response.self): \(WireCoding.describe(error))")
        }
    }

    static func serverError(from exchange: Exchange) -> CloudError {
        let retryAfter = exchange.headers.first(name: WireHeader.retryAfter).flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        if var error = try? WireCoding.decode(ServerError.self, from: exchange.body) {
            error.retryAfter = error.retryAfter ?? retryAfter
            return .server(error, httpStatus: exchange.status)
        }
        // Not an error body (a proxy's page, say): name the error after the status where one fits.
        let code: ServerErrorCode? =
            switch exchange.status {
            case 401: .authenticationFailed
            case 421: .authenticationRequired
            case 429: .throttled
            case 502, 503, 504: .tryAgainLater
            case 500...599: .internalError
            default: nil
            }
        guard let code else {
            return CloudError(
                .invalidResponse, httpStatus: exchange.status,
                message: "\(exchange.path) answered HTTP \(exchange.status) without an error body")
        }
        return .server(
            ServerError(code, reason: "HTTP \(exchange.status) from \(exchange.path)", retryAfter: retryAfter),
            httpStatus: exchange.status)
    }

    static func cloudError(for error: any Error, method: HTTPMethod, path: String, timeout: Duration) -> CloudError {
        if let error = error as? CloudError { return error }
        let what = "\(method.rawValue) \(path)"
        if error is CancellationError {
            return CloudError(.cancelled, message: "\(what) was cancelled")
        }
        if let error = error as? HTTPClientError {
            let timeouts: [HTTPClientError] = [
                .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .getConnectionFromPoolTimeout,
                .tlsHandshakeTimeout,
            ]
            if timeouts.contains(error) {
                return CloudError(.timeout, message: "\(what) got no answer within \(timeout)")
            }
            if error == .cancelled {
                return CloudError(.cancelled, message: "\(what) was cancelled")
            }
            if error == .bodyLengthMismatch {
                return CloudError(.invalidResponse, message: "\(what): \(error)")
            }
        }
        if error is NIOTooManyBytesError {
            return CloudError(.invalidResponse, message: "\(what): the answer is larger than the accepted maximum")
        }
        return CloudError(.network, message: "\(what) failed: \(Self.reason(error)); check the server address and the network")
    }

    /// A socket error as the system words it ("Connection refused"), anything else as it describes itself.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? IOError else { return "\(error)" }
        return String(cString: strerror(error.errnoCode))
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    static func percentEncoded(_ value: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}
