import CloudStoreWire
import Foundation
import Hummingbird

/// `GET /{db}/users/caller` and `GET /{db}/users/current`: who the credentials belong to.
struct UsersController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.get(":database/users/caller", use: caller)
        group.get(":database/users/current", use: caller)
    }

    @Sendable func caller(_ request: Request, context: CloudRequestContext) async throws -> Response {
        try JSONResponse.make(CallerResponse(userRecordName: context.authenticated.caller.userRecordName))
    }
}
