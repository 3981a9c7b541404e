import CloudStoreWire
import Foundation
import Hummingbird

/// `POST /public/records/accept` and `POST /public/records/resolve` (WireProtocol.md §6): join the
/// shares short GUIDs name, or preview what joining would give, one result per short GUID, in
/// order. The decisions are ``ShareAcceptance``'s; accepting writes as a `records/modify` of the
/// owner's zone does (the share record gets a new tag), and wakes the long polls of the owner's
/// private database and of every participant's shared database.
///
/// Both need a user (a server-to-server key gets 403) and are calls of the public database (the
/// path of another database is 400). A short GUID no share has, or one the server could not have
/// made, is a `NOT_FOUND` item.
struct SharesController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.post(":database/records/accept", use: accept)
        group.post(":database/records/resolve", use: resolve)
    }

    @Sendable func accept(_ request: Request, context: CloudRequestContext) async throws -> Response {
        try await answer(context, accepting: true)
    }

    @Sendable func resolve(_ request: Request, context: CloudRequestContext) async throws -> Response {
        try await answer(context, accepting: false)
    }

    private func answer(_ context: CloudRequestContext, accepting: Bool) async throws -> Response {
        let call = context.authenticated
        let operation = accepting ? DatabaseOperation.recordsAccept : .recordsResolve
        guard call.scope == .public else {
            throw APIError(.badRequest, "\(operation.rawValue) is a call of the public database: POST /public/\(operation.rawValue)")
        }
        guard case .user(let user) = call.caller else {
            throw APIError(.accessDenied, "\(operation.rawValue) needs a user's bearer token: shares are joined by users")
        }
        let body = try call.decode(ShareAcceptRequest.self)
        try services.limits.checkOperationCount(body.shortGUIDs.count, of: "shortGUIDs")
        var results: [ShareAcceptResponse.Result] = []
        for shortGUID in body.shortGUIDs.map(\.value) {
            let acceptance = ShareAcceptance(
                shortGUID: shortGUID, caller: user,
                stamp: Record.Stamp(timestamp: services.clock.now(), userRecordName: user, deviceID: call.deviceID))
            results.append(try await result(of: acceptance, accepting: accepting, in: call))
        }
        context.logger.info(
            accepting ? "shares accepted" : "shares resolved",
            metadata: ["count": "\(results.count)", "failed": "\(results.filter { $0.serverErrorCode != nil }.count)"])
        return try JSONResponse.make(ShareAcceptResponse(results: results))
    }

    private func result(of acceptance: ShareAcceptance, accepting: Bool, in call: AuthenticatedCall) async throws
        -> ShareAcceptResponse.Result
    {
        let shortGUID = acceptance.shortGUID
        guard ShareIdentifiers.isShortGUID(shortGUID),
            let zone = try await services.storage.sharedZone(
                shortGUID: shortGUID, container: call.container, environment: call.environment)
        else { return Self.failure(shortGUID, acceptance.decide(nil)) }

        let decision: Result<ShareAcceptance.Joined, ServerError>
        if accepting {
            guard
                let ((joined, sharedDatabases), written) = try await services.storage.modifyRecords(
                    in: zone, loading: ShareAcceptance.snapshotRequest,
                    decide: { snapshot in
                        let (plan, decision) = acceptance.plan(snapshot)
                        return (plan, (decision, plan.sharedDatabases))
                    })
            else { return Self.failure(shortGUID, acceptance.decide(nil)) }
            if !written.isEmpty {
                services.broker.publish(zone.partition.key)
                services.publish(sharedDatabases: sharedDatabases, of: zone)
            }
            decision = joined
        } else {
            decision = acceptance.decide(try await services.storage.share(in: zone))
        }
        guard case .success(let joined) = decision else { return Self.failure(shortGUID, decision) }
        let row = try await services.storage.records(named: [ShareMetadata.zoneShareRecordName], in: zone)?[
            ShareMetadata.zoneShareRecordName]
        var record = try row?.presented(in: zone)
        record?.share = joined.share.metadata(for: acceptance.caller, currentUser: joined.participant)
        return ShareAcceptResponse.Result(shortGUID: shortGUID, zoneID: zone.zoneID, share: record)
    }

    private static func failure(_ shortGUID: String, _ decision: Result<ShareAcceptance.Joined, ServerError>)
        -> ShareAcceptResponse.Result
    {
        guard case .failure(let error) = decision else {
            return ShareAcceptResponse.Result(shortGUID: shortGUID, serverErrorCode: .internalError)
        }
        return ShareAcceptResponse.Result(shortGUID: shortGUID, serverErrorCode: error.serverErrorCode, reason: error.reason)
    }
}
