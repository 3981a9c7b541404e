import CloudStoreWire
import Foundation

/// Where the server keeps subscriptions, the notifications they produce, and the push tokens
/// whose web courier delivers them (WireProtocol.md §8). Every backend implements it.
///
/// Notifications are written by ``ServerStorage/modifyRecords(in:loading:decide:)`` in the
/// transaction of the change that fired them (``NotificationPlan``), each at the sequence that
/// change gave its subscriber's database; so a long poll that sees a change sees its
/// notifications too, on every server instance.
protocol SubscriptionStorage: Sendable {
    /// The subscriber's subscriptions by ID, or all of them (by ID) when `ids` is nil.
    func subscriptions(of subscriber: Subscriber, ids: [String]?) async throws -> [Subscription]

    /// Applies the changes in order, in one transaction; answers, for each, the subscription saved
    /// or deleted, or nil for an update or a delete of a subscription that does not exist.
    func modifySubscriptions(_ changes: [SubscriptionChange], of subscriber: Subscriber) async throws -> [Subscription?]

    /// The subscriber's notifications at database sequences in `after <.. through`, oldest first,
    /// at most `limit`.
    func notifications(for subscriber: Subscriber, after: Int64, through: Int64, limit: Int) async throws
        -> [PushNotification]

    /// Stores a push token (by its digest) for a user; its web courier delivers the user's
    /// notifications written after now. Answers false, storing nothing, when the digest belongs
    /// to another user; true when stored or already the user's.
    func registerPushToken(digest: String, user: String, container: String, environment: CloudEnvironment)
        async throws -> Bool

    /// The user of a push token, and their oldest notification not yet delivered to it, which
    /// counts as delivered from now on; nil when the token is unknown.
    func takeNotification(tokenDigest: String, container: String, environment: CloudEnvironment) async throws
        -> PushDelivery?
}

/// What a web courier poll found: the token's user, and the next notification if any.
struct PushDelivery: Sendable {
    var user: String
    var notification: PushNotification?
}

extension NotificationPlan {
    /// How long a notification is kept for the long poll and the web courier: older ones are
    /// removed when newer ones are written (a client that was away longer catches up with the
    /// changes endpoints, as it must anyway).
    static let retention: TimeInterval = 7 * 24 * 3600

    /// A subscription as stored: its JSON.
    static func encoded(_ value: some Encodable) throws -> String {
        String(decoding: try WireCoding.encodedBytes(value), as: UTF8.self)
    }

    static func decoded<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
        try WireCoding.decode(type, from: Data(json.utf8))
    }
}
