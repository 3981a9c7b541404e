import CloudStoreWire
import Crypto
import Foundation
import Hummingbird

/// The routes an operator's tools call, outside the database API: no rate limit, no container.
///
/// - `GET /healthz`: 200 `{"status": "ok"}` while the process serves requests; no auth.
/// - `GET /readyz`: 200 when the storage answers, else 503 `TRY_AGAIN_LATER` naming why; no auth.
///   With read replicas, each one's state (`available`: whether it takes reads now; how many
///   it `served`, was `behind` for, and `failed`): a replica down never makes the server unready,
///   the primary answers in its stead.
/// - `GET /metrics`: Prometheus's text format (see ``ServerMetrics``); with an operator token
///   configured, only for `Authorization: Bearer <operator token>` (401 otherwise).
struct OperatingController: Sendable {
    let services: CloudServices
    /// SHA-256 of the operator token, when one is configured.
    private let operatorDigest: [UInt8]?

    init(services: CloudServices, operatorToken: String?) {
        self.services = services
        self.operatorDigest = operatorToken.map { Array(SHA256.hash(data: Data($0.utf8))) }
    }

    func register(on router: Router<CloudRequestContext>) {
        router.get("healthz", use: health)
        router.get("readyz", use: ready)
        router.get("metrics", use: metrics)
    }

    @Sendable func health(_ request: Request, context: CloudRequestContext) async throws -> Response {
        try JSONResponse.make(["status": "ok"])
    }

    @Sendable func ready(_ request: Request, context: CloudRequestContext) async throws -> Response {
        do {
            try await services.storage.checkReachable()
        } catch {
            let reason = StorageFailure.describe(error, doing: "checking that the storage answers")
            context.logger.error("storage unreachable", metadata: ["error": "\(reason)"])
            throw APIError(.tryAgainLater, "the storage does not answer: \(reason)", retryAfter: 5)
        }
        return try JSONResponse.make(Readiness(status: "ready", replicas: services.storage.replicaStatuses.nilIfEmpty))
    }

    @Sendable func metrics(_ request: Request, context: CloudRequestContext) async throws -> Response {
        try checkOperator(request)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: services.metrics.exposition())))
    }

    /// Throws 401 unless the request carries the operator token (when one is configured).
    func checkOperator(_ request: Request) throws(APIError) {
        guard operatorDigest != nil else { return }
        let presented = request.headers[.authorization].flatMap { header -> String? in
            header.lowercased().hasPrefix("bearer ") ? String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
        }
        guard let presented, isOperator(presented) else {
            throw APIError(.authenticationFailed, "this page needs the operator token: send Authorization: Bearer <operator token>")
        }
    }

    /// Whether `token` is the operator token; false when none is configured. The digests are
    /// compared in constant time.
    func isOperator(_ token: String) -> Bool {
        guard let operatorDigest else { return false }
        let digest = Array(SHA256.hash(data: Data(token.utf8)))
        return zip(digest, operatorDigest).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// What `GET /readyz` answers when the storage answers.
struct Readiness: Encodable {
    var status: String
    var replicas: [ReplicaStatus]?
}

extension Array {
    fileprivate var nilIfEmpty: Self? { isEmpty ? nil : self }
}
