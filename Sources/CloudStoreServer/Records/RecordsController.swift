import CloudStoreWire
import Crypto
import Foundation
import Hummingbird

/// `records/modify`, `records/lookup` and `records/query`.
///
/// A request whose zone does not exist answers 404 `ZONE_NOT_FOUND` for the whole request (not per
/// record): nothing in it could succeed. Through the shared database (WireProtocol.md §6) a request
/// works on the owner's zone once the caller's participation is checked; a zone the caller may not
/// use answers 403 `ACCESS_DENIED` for the whole request (``CloudServices/target(_:of:in:)``).
struct RecordsController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.post(":database/records/modify", use: modify)
        group.post(":database/records/lookup", use: lookup)
        group.post(":database/records/query", use: query)
    }

    @Sendable func modify(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(RecordsModifyRequest.self)
        try services.limits.checkOperationCount(body.operations.count, of: "operations")
        var names = Set<String>()
        for operation in body.operations where !names.insert(operation.record.recordName).inserted {
            throw APIError(
                .badRequest, "record \(operation.record.recordName.prefix(64)) appears twice: name each record once per request")
        }
        let partition = try call.partition()
        let target = try await services.target(body.zoneID, of: call, in: partition)
        let zone = target.zone
        let knownToken = try body.syncToken.map { text throws(APIError) in try SyncToken.decode(text, of: zone) }

        var rules = RecordRules(zone: zone, maxRecordBytes: services.limits.maxRecordBytes)
        rules.sameZoneReferencesOnly = target.participant != nil
        let operations = body.operations.map { operation in
            RecordsModifier.Operation(
                type: operation.operationType, record: operation.record,
                failure: zoneMismatch(operation.record, zone, rules) ?? rules.check(operation.record))
        }
        // `atomic` "only applies to custom zones" (Apple): in a default zone each operation stands
        // alone, whatever the request says.
        let atomic = zone.zoneName != ZoneID.defaultZoneName && (body.atomic ?? true)
        let services = self.services
        let modifier = RecordsModifier(
            operations: operations, atomic: atomic,
            stamp: Record.Stamp(
                timestamp: services.clock.now(), userRecordName: call.caller.userRecordName, deviceID: call.deviceID),
            environment: call.environment, onlyCreatorMayChange: partition.scope == .public && !call.caller.isTrusted,
            rules: rules, present: { try $0.presented(in: zone) }, participant: target.participant,
            shareRules: services.shareRules, untypedFields: UntypedFields(body: call.body))
        guard
            let ((outcomes, sharedDatabases, share, zoneBefore), written) = try await services.storage.modifyRecords(
                in: zone, loading: modifier.snapshotRequest,
                decide: { snapshot in
                    let (plan, outcomes) = try modifier.plan(snapshot)
                    return (plan, (outcomes, plan.sharedDatabases, plan.share(after: snapshot.share), snapshot.zone))
                })
        else { throw services.zoneNotFound(zone) }

        if !written.isEmpty {
            services.broker.publish(zone.partition.key)
            services.publish(sharedDatabases: sharedDatabases, of: zone)
        }
        services.metrics.wrote(written.count)
        let rows = Dictionary(written.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        for row in written {
            context.logger.debug(
                "record written", metadata: ["zone": "\(zone)", "record": "\(row.name)", "deleted": "\(row.isDeleted)"])
        }
        context.logger.info(
            "records modified",
            metadata: ["zone": "\(zone)", "count": "\(operations.count)", "written": "\(written.count)"])

        var failed = false
        let writer = try RecordWriter(
            zone: zone, numbersAsStrings: body.numbersAsStrings ?? false, share: share, caller: call.caller.userRecordName,
            assetURLs: call.assetURLs)
        var results: [RecordResult] = []
        var items: [[UInt8]] = []
        for (outcome, operation) in zip(outcomes, body.operations) {
            let result: RecordResult
            switch outcome {
            case .saved(let name):
                guard let row = rows[name] else {
                    result = .error(ServerError(.internalError, recordName: name))
                    break
                }
                items.append(try writer.json(row, desiredKeys: operation.desiredKeys ?? body.desiredKeys))
                continue
            case .deleted(let name):
                result = .value(Record(recordName: name, deleted: true))
            case .failed(let error):
                failed = true
                result = .error(error)
            case .atomicError(let name):
                result = .error(
                    ServerError(
                        .atomicError, reason: "another operation of this atomic request failed; nothing was saved",
                        recordName: name, zoneID: zone.zoneID))
            }
            results.append(result)
            items.append(try writer.json(result))
        }
        // An atomic request with a failure saved nothing: every item is an error or a delete.
        if atomic && failed { throw AtomicFailure(results: results) }
        let fullRecords = body.desiredKeys == nil && body.operations.allSatisfy { $0.desiredKeys == nil }
        let syncToken =
            fullRecords
            ? SyncToken.afterWrite(known: knownToken, in: zone, before: zoneBefore, written: written, answered: outcomes) : nil
        return try JSONResponse.make(
            RecordsResponse(records: [], syncToken: syncToken?.encoded), records: [items],
            numbersAsStrings: body.numbersAsStrings ?? false)
    }

    @Sendable func lookup(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(RecordsLookupRequest.self)
        try services.limits.checkOperationCount(body.records.count, of: "records")
        let partition = try call.partition()
        let zone = try await services.target(body.zoneID, of: call, in: partition).zone
        let names = body.records.map(\.recordName).filter { RecordRules.recordNameProblem($0) == nil }
        guard let rows = try await services.storage.records(named: names, in: zone) else {
            throw services.zoneNotFound(zone)
        }
        let writer = try RecordWriter(
            zone: zone, numbersAsStrings: body.numbersAsStrings ?? false,
            share: try await services.share(for: rows.values, in: zone), caller: call.caller.userRecordName,
            assetURLs: call.assetURLs)
        let items = try body.records.map { item -> [UInt8] in
            if let problem = RecordRules.recordNameProblem(item.recordName) {
                return try writer.json(
                    .error(ServerError(.badRequest, reason: problem, recordName: item.recordName, zoneID: zone.zoneID)))
            }
            guard let row = rows[item.recordName] else {
                return try writer.json(
                    .error(
                        ServerError(
                            .notFound, reason: "record \(item.recordName.prefix(255)) does not exist",
                            recordName: item.recordName, zoneID: zone.zoneID)))
            }
            return try writer.json(row, desiredKeys: item.desiredKeys ?? body.desiredKeys)
        }
        services.metrics.served(rows.count)
        return try JSONResponse.make(
            RecordsResponse(records: []), records: [items], numbersAsStrings: body.numbersAsStrings ?? false)
    }

    @Sendable func query(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(RecordsQueryRequest.self)
        let limit = try services.limits.pageSize(body.resultsLimit)
        let evaluator = try QueryEvaluator(body.query)
        let partition = try call.partition()
        let zone = try await services.target(body.zoneID, of: call, in: partition).zone
        let marker = try ContinuationMarker(query: body.query, zone: zone)
        let offset = try body.continuationMarker.map { text throws(APIError) in try marker.offset(from: text) } ?? 0
        // The share's type is matched case-insensitively (WireProtocol.md §6) and stored in lowercase.
        let recordType = ShareMetadata.isShareType(body.query.recordType) ? ShareMetadata.recordType : body.query.recordType
        guard let rows = try await services.storage.records(ofType: recordType, in: zone) else {
            throw services.zoneNotFound(zone)
        }
        let matching = try evaluator.run(rows)
        let page = matching.dropFirst(offset).prefix(limit)
        let next = offset + page.count < matching.count ? marker.encoded(offset: offset + page.count) : nil
        let writer = try RecordWriter(
            zone: zone, numbersAsStrings: body.numbersAsStrings ?? false,
            share: try await services.share(for: page, in: zone), caller: call.caller.userRecordName,
            assetURLs: call.assetURLs)
        let items = try page.map { try writer.json($0, desiredKeys: body.desiredKeys) }
        services.metrics.served(items.count)
        return try JSONResponse.make(
            RecordsQueryResponse(records: [], continuationMarker: next), records: [items],
            numbersAsStrings: body.numbersAsStrings ?? false)
    }

    private func zoneMismatch(_ record: Record, _ zone: ZoneAddress, _ rules: RecordRules) -> ServerError? {
        guard let zoneID = record.zoneID else { return nil }
        let sameOwner = zoneID.ownerRecordName.map { $0 == zone.partition.owner } ?? true
        guard zoneID.zoneName != zone.zoneName || !sameOwner else { return nil }
        return rules.failure(
            .badRequest, "record \(record.recordName) names zone \(zoneID.zoneName), but the request is for zone \(zone.zoneName)",
            record.recordName)
    }
}

/// The opaque `continuationMarker` of `records/query`: an offset tied to one query in one zone.
struct ContinuationMarker: Sendable {
    private let fingerprint: String

    init(query: RecordsQueryRequest.Query, zone: ZoneAddress) throws {
        let data = try WireCoding.encode(query) + Data(zone.description.utf8)
        fingerprint = SHA256.hash(data: data).prefix(8).hexadecimal
    }

    func encoded(offset: Int) -> String {
        Data("\(offset).\(fingerprint)".utf8).base64EncodedString()
    }

    func offset(from marker: String) throws(APIError) -> Int {
        guard let data = Data(base64Encoded: marker), let text = String(data: data, encoding: .utf8) else {
            throw APIError(.badRequest, "continuationMarker is malformed: start the query again without it")
        }
        let parts = text.split(separator: ".")
        guard parts.count == 2, parts[1] == fingerprint, let offset = Int(parts[0]), offset >= 0 else {
            throw APIError(.badRequest, "continuationMarker belongs to another query: start the query again without it")
        }
        return offset
    }
}
