import CloudStoreWire
import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// The request context of every route: after ``RequestGate`` it carries the authenticated call.
struct CloudRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// Set by ``RequestGate`` before any controller runs.
    var call: AuthenticatedCall?
    /// The client's IP address, which rate-limits requests that fail to authenticate.
    let clientAddress: String?
    /// What the middleware learns about the request, for the outer middleware that records it.
    let trace = RequestTrace()
    private let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        channel = source.channel
        clientAddress = source.channel.remoteAddress?.ipAddress
    }

    /// Closes the connection a second after now, time enough to send the answer being prepared:
    /// for a client still sending a body the server will not read.
    private func closeConnectionSoon() {
        let channel = channel
        channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }

    /// Answers `error` to a request whose body is not wanted, once the rest of the body has been
    /// read and dropped: closing a socket with unread bytes resets it, and a client still sending
    /// (or one that sends its whole body before reading, as Python's `urllib` does) would lose the
    /// answer. A body still arriving at `deadline` gets the answer at once, with `Connection: close`,
    /// and its connection closes shortly after.
    func refusingBody(
        _ error: APIError, rest chunks: inout RequestBody.AsyncIterator, deadline: ContinuousClock.Instant
    ) async -> APIError {
        do {
            while try await chunks.next() != nil {
                if ContinuousClock.now > deadline { return closingAfterAnswer(error) }
            }
            return error
        } catch {
            return closingAfterAnswer(error as? APIError ?? APIError(.badRequest, "the request body broke off: send it again"))
        }
    }

    /// `error` with `Connection: close`, the connection closing a second after the answer.
    func closingAfterAnswer(_ error: APIError) -> APIError {
        closeConnectionSoon()
        var error = error
        error.headers[.connection] = "close"
        return error
    }

    /// The authenticated call; a route outside the gate is a programming error.
    var authenticated: AuthenticatedCall {
        guard let call else { preconditionFailure("a database route is registered outside the request gate") }
        return call
    }
}

/// What ``RequestGate`` learns about a request (its caller), shared with ``ErrorMiddleware``,
/// which runs outside it and records the request.
final class RequestTrace: Sendable {
    private let state = Mutex<String?>(nil)

    /// Who called, once authenticated, e.g. `user _alice`.
    var caller: String? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A request that passed the gate: a valid container and environment, a body within the limit,
/// and a caller.
struct AuthenticatedCall: Sendable {
    var caller: Caller
    var container: String
    var environment: CloudEnvironment
    /// The database of the path, for database routes.
    var scope: DatabaseScope?
    var body: [UInt8]
    /// The `X-CloudStore-Device` header, echoed in the stamps of the records this request writes.
    var deviceID: String?
    /// How the asset download URLs of this call's answers read; nil on routes without a database.
    var assetURLs: AssetDownloadURLs?

    /// Decodes the body; a failure answers 400 naming where in the JSON the problem is.
    func decode<T: Decodable>(_ type: T.Type) throws(APIError) -> T {
        do {
            return try WireCoding.decode(type, from: Data(body))
        } catch {
            throw APIError(.badRequest, WireCoding.describe(error))
        }
    }

    /// The partition of this call's database that the caller may use, or 403/421.
    ///
    /// Private and shared databases belong to a user; a server-to-server key reaches the public
    /// database only.
    func partition() throws(APIError) -> DatabasePartition {
        guard let scope else { preconditionFailure("partition() on a route without a database") }
        switch (scope, caller) {
        case (.public, _):
            return DatabasePartition(
                container: container, environment: environment, scope: .public, owner: DatabasePartition.publicOwner)
        case (.private, .user(let user)), (.shared, .user(let user)):
            return DatabasePartition(container: container, environment: environment, scope: scope, owner: user)
        case (_, .serverKey), (_, .operator):
            throw APIError(
                .accessDenied,
                "\(caller) reaches the public database only; use a user's bearer token for the \(scope.rawValue) database")
        case (_, .apiToken):
            throw APIError(
                .authenticationRequired,
                "the \(scope.rawValue) database needs a signed-in user: send the user's ckWebAuthToken (or a bearer token) with the API token")
        }
    }

    /// The zone a request names, in the caller's partition; a zone of another owner is 403.
    func zone(_ zoneID: ZoneID?, in partition: DatabasePartition) throws(APIError) -> ZoneAddress {
        let zoneID = zoneID ?? .default
        if let owner = zoneID.ownerRecordName, owner != partition.owner {
            let isCallerItself = partition.scope == .public && owner == caller.userRecordName
            guard isCallerItself else {
                throw APIError(
                    .accessDenied, "zone \(zoneID.zoneName) belongs to \(owner); you may use only your own zones",
                    zoneID: zoneID)
            }
        }
        try ZoneNames.validate(zoneID.zoneName)
        return partition.zone(zoneID.zoneName)
    }
}

/// Rules for zone names.
enum ZoneNames {
    /// Non-empty, at most 255 bytes, no control characters.
    static func validate(_ name: String) throws(APIError) {
        guard !name.isEmpty, name.utf8.count <= 255, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw APIError(.badRequest, "zone name \"\(name.prefix(64))\" is invalid: use 1 to 255 printable characters")
        }
    }
}
