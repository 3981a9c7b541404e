import CloudStoreWire
import Foundation
import Hummingbird
import NIOCore

/// Assets (WireProtocol.md §7): `assets/upload` issues upload URLs; the upload URL receives the
/// bytes and answers a receipt; the download URL serves them.
///
/// Upload URLs are absolute (``RequestOrigin``) and their own authority, as Apple's are: a client
/// posts the bytes without credentials and acts as the caller the URL was issued to
/// (``RequestGate``); with credentials, they must be that caller's.
///
/// The bytes stream both ways: an upload goes to the storage as it arrives while its SHA-256 is
/// computed, a download leaves the storage in chunks of at most ``AssetStorageChunk/bytes``. The
/// byte routes sit behind a gate that leaves the body unread, so the 4 MiB JSON body limit does not
/// apply to them; ``ServerLimits/assetBytes`` does. An upload's deadline is on progress, not on
/// the total: each piece of the body must arrive within ``ServerLimits/bodyTimeoutSeconds`` of the
/// one before, so a 250 MiB upload may take as long as it needs while it keeps moving.
///
/// A shared zone's assets (WireProtocol.md §6) are its owner's: `assets/upload` in the shared
/// database (for `READ_WRITE` participants; `READ_ONLY` ones get 403) issues upload URLs of the
/// owner's private database bound to the participant, and download URLs are the owner's. The
/// participant calls both with their own token; each call checks their participation again.
struct AssetsController: Sendable {
    let services: CloudServices

    /// `POST {db}/assets/upload`, behind the gate that reads JSON bodies.
    func register(on group: RouterGroup<CloudRequestContext>) {
        group.post(":database/assets/upload", use: requestUploads)
    }

    /// The byte routes, behind a gate that leaves the body unread.
    func registerTransfers(on group: RouterGroup<CloudRequestContext>) {
        group.post(":database/assets/upload/:uploadID", use: upload)
        group.get(":database/assets/download/:assetID", use: download)
    }

    @Sendable func requestUploads(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(AssetUploadRequest.self)
        try services.limits.checkOperationCount(body.tokens.count, of: "tokens")
        let partition = try call.partition()
        let target = try await services.target(body.zoneID, of: call, in: partition)
        let zone = target.zone
        if target.permission == .readOnly {
            throw APIError(
                .accessDenied,
                "you may read zone \(zone.zoneName) of \(zone.partition.owner) but not change it (READ_ONLY): ask its owner for READ_WRITE",
                zoneID: zone.zoneID)
        }
        for token in body.tokens {
            let problem =
                RecordRules.recordNameProblem(token.recordName)
                ?? RecordRules.identifierProblem(token.fieldName, what: "field name")
                ?? token.recordType.flatMap { RecordRules.identifierProblem($0, what: "record type") }
            if let problem { throw APIError(.badRequest, problem, zoneID: zone.zoneID, recordName: token.recordName) }
        }
        guard try await services.storage.zones(named: [zone.zoneName], in: zone.partition)[zone.zoneName] != nil else {
            throw services.zoneNotFound(zone)
        }
        let expiresAt = services.clock.now().addingTimeInterval(AssetUpload.lifetime)
        let uploads = body.tokens.map { token in
            AssetUpload(
                id: AssetLocation.newIdentifier(), zone: zone, recordName: token.recordName, fieldName: token.fieldName,
                caller: call.caller.userRecordName, expiresAt: expiresAt)
        }
        try await services.storage.addAssetUploads(uploads)
        context.logger.info("asset uploads issued", metadata: ["zone": "\(zone)", "count": "\(uploads.count)"])
        let origin = RequestOrigin.of(request) ?? ""
        return try JSONResponse.make(
            AssetUploadResponse(
                tokens: uploads.map {
                    .init(
                        recordName: $0.recordName, fieldName: $0.fieldName,
                        url: origin + AssetLocation.uploadPath(zone.partition, uploadID: $0.id))
                }))
    }

    @Sendable func upload(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let partition = try call.partition()
        let uploadID = context.parameters.get("uploadID") ?? ""
        guard AssetLocation.isIdentifier(uploadID),
            let upload = try await services.storage.assetUpload(uploadID, container: call.container),
            upload.zone.partition.environment == partition.environment, upload.zone.partition.scope == partition.scope
        else {
            throw APIError(.notFound, "this upload URL is unknown (or expired and forgotten): request one with assets/upload")
        }
        guard upload.caller == call.caller.userRecordName else {
            throw APIError(.accessDenied, "this upload URL was issued to another user: request your own with assets/upload")
        }
        if upload.zone.partition.scope == .private, upload.caller != upload.zone.partition.owner {
            let participant = try await services.storage.participant(upload.caller, in: upload.zone)
            guard AssetAccess.mayUpload(upload.caller, to: upload.zone, participant: participant) else {
                throw APIError(
                    .accessDenied,
                    "you may no longer change zone \(upload.zone.zoneName) of \(upload.zone.partition.owner): its share ended or allows reading only")
            }
        }
        guard upload.expiresAt > services.clock.now() else {
            throw APIError(.notFound, "this upload URL expired (they last 15 minutes): request a new one with assets/upload")
        }
        let limit = services.limits.assetBytes
        var chunks = request.body.makeAsyncIterator()
        let bodyTimeout = Duration.seconds(services.limits.bodyTimeoutSeconds)
        if let length = request.headers[.contentLength].flatMap({ Int64($0) }), length > limit {
            throw await context.refusingBody(tooLarge, rest: &chunks, deadline: .now + bodyTimeout)
        }

        let assetID = AssetLocation.newIdentifier()
        let sink = try await services.storage.receiveAsset(assetID, for: upload)
        var checksum = AssetChecksum()
        var lastProgress = ContinuousClock.now
        do {
            while let chunk = try await chunks.next() {
                guard checksum.size + Int64(chunk.readableBytes) <= limit else {
                    throw await context.refusingBody(tooLarge, rest: &chunks, deadline: .now + bodyTimeout)
                }
                guard ContinuousClock.now - lastProgress <= bodyTimeout else {
                    throw context.closingAfterAnswer(
                        APIError(
                            .badRequest,
                            "the upload stalled for more than \(Int(services.limits.bodyTimeoutSeconds)) s: send it again"))
                }
                lastProgress = ContinuousClock.now
                chunk.withUnsafeReadableBytes { checksum.update(bufferPointer: $0) }
                services.assetChunkObserver?(chunk.readableBytes)
                try await sink.write(chunk)
            }
            let (receipt, fileChecksum, size) = (AssetLocation.newIdentifier(), checksum.base64, checksum.size)
            try await sink.commit(fileChecksum: fileChecksum, size: size, receipt: receipt)
            services.metrics.uploadedAssetBytes(size)
            context.logger.info(
                "asset uploaded",
                metadata: [
                    "zone": "\(upload.zone)", "record": "\(upload.recordName)", "field": "\(upload.fieldName)",
                    "asset": "\(assetID)", "size": "\(size)",
                ])
            return try JSONResponse.make(
                AssetUploadResult(singleFile: .init(fileChecksum: fileChecksum, size: size, receipt: receipt)))
        } catch {
            await sink.discard()
            throw error
        }
    }

    @Sendable func download(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let assetID = context.parameters.get("assetID") ?? ""
        guard AssetLocation.isIdentifier(assetID),
            let asset = try await services.storage.asset(assetID, container: call.container),
            asset.zone.partition.environment == call.environment,
            asset.zone.partition.scope == call.scope || (call.scope == .shared && asset.zone.partition.scope == .private)
        else {
            throw APIError(.notFound, "this asset does not exist (or was removed): look the record up again for its current downloadURL")
        }
        let user = call.caller.userRecordName
        var participant: StoredParticipant?
        if asset.zone.partition.scope == .private, !call.caller.isTrusted, user != asset.zone.partition.owner {
            participant = try await services.storage.participant(user, in: asset.zone)
        }
        guard AssetAccess.mayDownload(call.caller, from: asset.zone.partition, participant: participant) else {
            throw APIError(.accessDenied, "this asset belongs to a zone of another user; you may download only your own assets")
        }
        var headers: HTTPFields = [
            .contentType: "application/octet-stream", .acceptRanges: "bytes", .eTag: "\"\(asset.fileChecksum)\"",
        ]
        let range: Range<Int64>
        let status: HTTPResponse.Status
        switch ByteRangeRequest(header: request.headers[.range], size: asset.size) {
        case .whole:
            (range, status) = (0..<asset.size, .ok)
        case .part(let part):
            (range, status) = (part, .partialContent)
            headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(asset.size)"
        case .unsatisfiable:
            var error = APIError(
                .badRequest, "the range is outside the asset's \(asset.size) bytes: ask for bytes below \(asset.size)",
                status: .rangeNotSatisfiable)
            error.headers[.contentRange] = "bytes */\(asset.size)"
            throw error
        }
        let storage = services.storage
        let metrics = services.metrics
        let observer = services.assetChunkObserver
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: Int(range.count)) { writer in
                try await storage.readAsset(asset, range: range) { chunk in
                    observer?(chunk.readableBytes)
                    metrics.downloadedAssetBytes(chunk.readableBytes)
                    try await writer.write(chunk)
                }
                try await writer.finish(nil)
            })
    }

    /// 413 for an upload over the limit.
    private var tooLarge: APIError {
        APIError(
            .limitExceeded,
            "the asset is larger than \(services.limits.assetBytes) bytes, the server's limit for one asset: make it smaller")
    }
}
