/// A `serverErrorCode` of the wire protocol (<doc:WireProtocol> §4), with its HTTP status and what
/// a client should do.
///
/// Open: a code this version does not know still decodes, and is treated as fatal for its item.
public struct ServerErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// No permission for the database, zone or record. Fatal for the item.
    public static let accessDenied = ServerErrorCode(rawValue: "ACCESS_DENIED")
    /// Another operation of an atomic batch failed. Resend once the culprit is fixed.
    public static let atomicError = ServerErrorCode(rawValue: "ATOMIC_ERROR")
    /// The token or signature was rejected. Stop; never retry blindly.
    public static let authenticationFailed = ServerErrorCode(rawValue: "AUTHENTICATION_FAILED")
    /// The request needs a user and carried none. Stop and report.
    public static let authenticationRequired = ServerErrorCode(rawValue: "AUTHENTICATION_REQUIRED")
    /// The request is not valid. Fatal; on a changes call with a token, reset that token.
    public static let badRequest = ServerErrorCode(rawValue: "BAD_REQUEST")
    /// The change tag is stale. Merge with the server copy and resend with its tag.
    public static let conflict = ServerErrorCode(rawValue: "CONFLICT")
    /// The record to create already exists. Handle as a conflict.
    public static let exists = ServerErrorCode(rawValue: "EXISTS")
    /// The server failed. Back off and retry.
    public static let internalError = ServerErrorCode(rawValue: "INTERNAL_ERROR")
    /// The record does not exist.
    public static let notFound = ServerErrorCode(rawValue: "NOT_FOUND")
    /// The user's storage is full. Pause uploads, keep the queue.
    public static let quotaExceeded = ServerErrorCode(rawValue: "QUOTA_EXCEEDED")
    /// Too many requests. Wait `retryAfter` seconds, keep the queue.
    public static let throttled = ServerErrorCode(rawValue: "THROTTLED")
    /// The server is busy. Wait `retryAfter` or back off, keep the queue.
    public static let tryAgainLater = ServerErrorCode(rawValue: "TRY_AGAIN_LATER")
    /// A validating reference's target is missing. Save the target first or in the same batch.
    public static let validatingReferenceError = ServerErrorCode(rawValue: "VALIDATING_REFERENCE_ERROR")
    /// The zone does not exist. Create it and re-upload its data.
    public static let zoneNotFound = ServerErrorCode(rawValue: "ZONE_NOT_FOUND")
    /// (ext) The request or a record is too large, or has too many operations. Split and retry.
    public static let limitExceeded = ServerErrorCode(rawValue: "LIMIT_EXCEEDED")
    /// (ext) The sync token is older than the server's tombstone horizon. Refetch from scratch.
    public static let changeTokenExpired = ServerErrorCode(rawValue: "CHANGE_TOKEN_EXPIRED")
    /// (ext: Apple's code, used as <doc:WireProtocol> §3 says) A save would give its record the
    /// values of a uniqueness constraint that another live record of the zone has. Merge into the
    /// error's `serverRecord` (that record), or change the values. Fatal for the item.
    public static let uniqueFieldError = ServerErrorCode(rawValue: "UNIQUE_FIELD_ERROR")

    /// Every code the wire protocol defines (<doc:WireProtocol> §4).
    public static let allKnown: [ServerErrorCode] = [
        .accessDenied, .atomicError, .authenticationFailed, .authenticationRequired, .badRequest, .conflict,
        .exists, .internalError, .notFound, .quotaExceeded, .throttled, .tryAgainLater,
        .validatingReferenceError, .zoneNotFound, .limitExceeded, .changeTokenExpired, .uniqueFieldError,
    ]

    /// The HTTP status a request-level error with this code answers with.
    public var httpStatus: Int {
        switch self {
        case .accessDenied: 403
        case .atomicError, .badRequest: 400
        case .authenticationFailed: 401
        case .authenticationRequired: 421
        case .conflict, .exists: 409
        case .internalError: 500
        case .notFound, .zoneNotFound: 404
        case .quotaExceeded, .limitExceeded: 413
        case .throttled: 429
        case .tryAgainLater: 503
        case .validatingReferenceError: 412
        case .changeTokenExpired: 410
        case .uniqueFieldError: 409
        default: 500
        }
    }

    /// Whether the failure is transient: the same request may succeed later, so a client keeps the
    /// change pending and retries.
    public var isTransient: Bool {
        self == .internalError || self == .throttled || self == .tryAgainLater
    }
}
