import CloudStoreWire

extension FaultProxy {
    /// What the proxy does with one request.
    public enum Fault: Sendable, Hashable, CustomStringConvertible {
        /// Forward the request and its answer unchanged.
        case pass
        /// Close the connection without forwarding: the server never sees the request.
        case dropRequest
        /// Forward the request, then close the connection before answering: the server applied
        /// it but the client never hears.
        case dropResponse
        /// Send the request to the server twice, one after the other, and answer with the second
        /// answer, as when a retransmitted request's answer is the one that arrives.
        case duplicateRequest
        /// Wait this long on the proxy's clock, then forward.
        case delay(Duration)
        /// Hold the request until the next request has been forwarded (or until the proxy's hold
        /// timeout passes), then forward it: the server sees the two in the opposite order.
        case reorder
        /// Answer 429 `THROTTLED` with `retryAfter` and `Retry-After`, without forwarding.
        case throttle(retryAfter: Int)
        /// Answer 503 `TRY_AGAIN_LATER` with `retryAfter` and `Retry-After`, without forwarding.
        case unavailable(retryAfter: Int)
        /// Forward the request, then send the answer's head and half its body and close the
        /// connection.
        case cutResponse

        /// The kind of fault, for counting.
        public var kind: Kind {
            switch self {
            case .pass: .pass
            case .dropRequest: .dropRequest
            case .dropResponse: .dropResponse
            case .duplicateRequest: .duplicateRequest
            case .delay: .delay
            case .reorder: .reorder
            case .throttle: .throttle
            case .unavailable: .unavailable
            case .cutResponse: .cutResponse
            }
        }

        public var description: String {
            switch self {
            case .delay(let duration): "delay(\(duration))"
            case .throttle(let seconds): "throttle(retryAfter: \(seconds))"
            case .unavailable(let seconds): "unavailable(retryAfter: \(seconds))"
            default: kind.rawValue
            }
        }

        /// Every kind of fault once, with small waits, for plans that should try everything.
        public static let all: [Fault] = [
            .dropRequest, .dropResponse, .duplicateRequest, .delay(.milliseconds(20)), .reorder,
            .throttle(retryAfter: 1), .unavailable(retryAfter: 1), .cutResponse,
        ]
    }

    /// A fault without its parameters; ``partitioned`` counts requests refused by a partition.
    public enum Kind: String, Sendable, Hashable, CaseIterable, Comparable {
        case pass, dropRequest, dropResponse, duplicateRequest, delay, reorder, throttle, unavailable, cutResponse
        case partitioned

        public static func < (lhs: Kind, rhs: Kind) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// A request as the fault plan sees it.
    public struct Request: Sendable, Hashable {
        /// 0 for the first request through the proxy, then 1, 2, …
        public var index: Int
        public var method: String
        /// The path with its query.
        public var uri: String
        /// The database operation of a `/database/1/...` path, if it is one.
        public var operation: DatabaseOperation?
        /// The `X-CloudStore-Device` header.
        public var deviceID: String?

        public init(index: Int, method: String, uri: String, deviceID: String? = nil) {
            self.index = index
            self.method = method
            self.uri = uri
            self.deviceID = deviceID
            self.operation = Self.operation(of: uri)
        }

        /// `records/modify` in `/database/1/c/development/private/records/modify?x=1`.
        static func operation(of uri: String) -> DatabaseOperation? {
            let path = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
            let segments = path.split(separator: "/")
            guard segments.count >= 6, segments[0] == "database", segments[1] == "1" else { return nil }
            return DatabaseOperation(rawValue: segments.dropFirst(5).joined(separator: "/"))
        }
    }

    /// What the proxy did, for a test's report line.
    public struct Statistics: Sendable, Hashable, CustomStringConvertible {
        /// Requests that arrived.
        public var requests = 0
        /// Requests sent on to the server (a duplicated request counts twice).
        public var forwarded = 0
        /// Requests by the fault applied to them (``Kind/pass`` for those without one).
        public var faults: [Kind: Int] = [:]

        public init() {}

        /// Requests that got a fault (anything but ``Kind/pass``).
        public var faulted: Int { faults.filter { $0.key != .pass }.values.reduce(0, +) }

        /// `requests 1,240, forwarded 1,100, faults 310 (dropRequest 80, throttle 40, …)`.
        public var description: String {
            let kinds = faults.filter { $0.key != .pass && $0.value > 0 }.sorted { $0.key < $1.key }
                .map { "\($0.key.rawValue) \(ReportFormat.count($0.value))" }
            let detail = kinds.isEmpty ? "" : " (\(kinds.joined(separator: ", ")))"
            return "requests \(ReportFormat.count(requests)), forwarded \(ReportFormat.count(forwarded)), faults \(ReportFormat.count(faulted))\(detail)"
        }

        /// The sum of two runs' statistics.
        public static func + (lhs: Statistics, rhs: Statistics) -> Statistics {
            var sum = lhs
            sum.requests += rhs.requests
            sum.forwarded += rhs.forwarded
            sum.faults.merge(rhs.faults, uniquingKeysWith: +)
            return sum
        }
    }
}
