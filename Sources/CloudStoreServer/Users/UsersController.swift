import CloudStoreWire
import Foundation
import Hummingbird

/// `GET /{db}/users/caller` and `GET /{db}/users/current`: who the credentials belong to;
/// `users/discover` and `users/lookup/*`: the identities of users the server knows by record name
/// (``UsersLookupRequest``), nothing about anyone else.
struct UsersController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.get(":database/users/caller", use: caller)
        group.get(":database/users/current", use: caller)
        group.post(":database/users/discover", use: lookup)
        // Without lookup infos Apple's service answers the caller's discoverable contacts: this
        // server knows no one's contacts.
        group.get(":database/users/discover") { _, _ in try JSONResponse.make(UsersResponse(users: [])) }
        for kind in ["id", "email", "phone"] {
            group.post(":database/users/lookup/\(kind)", use: lookup)
        }
        group.post(":database/users/lookup/contacts") { _, _ in try JSONResponse.make(UsersResponse(users: [])) }
    }

    @Sendable func lookup(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(UsersLookupRequest.self)
        try services.limits.checkOperationCount(body.lookupInfos.count, of: "users")
        var found: [ShareParticipant.UserIdentity] = []
        for info in body.lookupInfos {
            guard let name = info.userRecordName, services.isKnownUser(name) else { continue }
            found.append(.init(userRecordName: name, lookupInfo: .init(userRecordName: name)))
        }
        return try JSONResponse.make(UsersResponse(users: found))
    }

    @Sendable func caller(_ request: Request, context: CloudRequestContext) async throws -> Response {
        try JSONResponse.make(CallerResponse(userRecordName: context.authenticated.caller.userRecordName))
    }
}
