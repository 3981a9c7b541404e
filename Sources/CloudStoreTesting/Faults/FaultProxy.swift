import CloudStoreWire
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP proxy on 127.0.0.1 and a free port, in front of a CloudStore server, that makes chosen
/// requests fail the way networks and servers do: dropped requests and answers, duplicates,
/// delays, reordering, 429 and 503 answers, answers cut mid-body, and partitions.
///
/// Point the app's `HTTPCloudDatabase` at ``baseURL`` instead of the server's, then say what
/// should go wrong, either request by request or as a seeded random plan:
///
/// ```swift
/// let server = try await TestServer.start()
/// let proxy = try await FaultProxy.start(inFrontOf: server.baseURL)
/// let database = HTTPCloudDatabase(baseURL: proxy.baseURL, container: "iCloud.test", token: "alice-token", deviceID: "A")
///
/// proxy.inject(.dropResponse, into: .recordsModify)    // the server applies the next save, the client never hears
/// proxy.inject(.throttle(retryAfter: 30))              // the next request of any kind answers 429
/// proxy.setRandomFaults(seed: 42, rate: 0.2)           // then one request in five fails somehow
/// proxy.isPartitioned = true                           // every request fails at once until false again
/// print(proxy.statistics)                              // requests 120, forwarded 101, faults 24 (dropRequest 3, …)
/// await proxy.shutdown()
/// ```
///
/// Faults are chosen when a request has arrived whole, in this order: a partition, then the injected
/// faults (in the order they were injected, each for its number of `times`), then the plan set
/// with ``setPlan(_:)``, then the random plan; a request none of them picks passes. Every wait has a
/// timeout, so a fault never hangs a test: the server gets ``Configuration/upstreamTimeout`` to
/// answer, and a held request goes on after ``Configuration/holdTimeout``.
public final class FaultProxy: Sendable {
    /// How long the proxy waits for things, and on which clock delays run.
    public struct Configuration: Sendable {
        /// How long the server may take to answer a forwarded request; longer than a long poll.
        public var upstreamTimeout: Duration = .seconds(120)
        /// How long connecting to the server may take.
        public var connectTimeout: Duration = .seconds(5)
        /// The longest a ``Fault/reorder`` request waits for the next request, in real time.
        public var holdTimeout: Duration = .seconds(5)
        /// The largest request or answer body the proxy carries; a larger one closes the connection.
        public var maxBodyBytes = 64 << 20
        /// The clock ``Fault/delay(_:)`` sleeps on; inject a ``TestClock`` to move time by hand.
        public var clock: any Clock<Duration> = ContinuousClock()

        public init() {}
    }

    private struct Rule {
        var fault: Fault
        var operation: DatabaseOperation?
        var remaining: Int
    }

    private struct RandomPlan {
        var random: SeededRandomNumberGenerator
        var rate: Double
        var faults: [Fault]
        var operations: Set<DatabaseOperation>?
    }

    private struct State {
        var target: @Sendable () -> URL
        var rules: [Rule] = []
        var plan: (@Sendable (Request) -> Fault)?
        var randomPlan: RandomPlan?
        var isPartitioned = false
        var isShutDown = false
        var statistics = Statistics()
        var nextIndex = 0
        var clientChannels: [ObjectIdentifier: any Channel] = [:]
        var upstreamChannels: [ObjectIdentifier: any Channel] = [:]
        var held: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextHoldID = 0
        var requestWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        /// Removes and answers the waiters whose count of requests has arrived.
        mutating func satisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
            let arrived = statistics.requests
            let ready = requestWaiters.filter { $0.count <= arrived }.map(\.continuation)
            requestWaiters.removeAll { $0.count <= arrived }
            return ready
        }
    }

    /// The port the proxy listens on.
    public let port: Int
    /// `http://127.0.0.1:<port>`: give this to clients instead of the server's URL.
    public let baseURL: URL
    let configuration: Configuration
    private let state: Mutex<State>
    private let listener: any Channel
    private let acceptTask = Mutex<Task<Void, Never>?>(nil)

    private init(port: Int, listener: any Channel, target: @escaping @Sendable () -> URL, configuration: Configuration) {
        self.port = port
        self.baseURL = URL(string: "http://127.0.0.1:\(port)")!
        self.listener = listener
        self.configuration = configuration
        self.state = Mutex(State(target: target))
    }

    /// Starts a proxy in front of a server whose address never changes.
    public static func start(
        inFrontOf target: URL, port: Int = 0, configuration: Configuration = Configuration()
    ) async throws -> FaultProxy {
        try await start(port: port, configuration: configuration, target: { target })
    }

    /// Starts a proxy in front of a server whose address may change, such as a
    /// ``RestartableServer`` that could not get its port back: `target` is asked at every request.
    ///
    /// ```swift
    /// let proxy = try await FaultProxy.start { server.baseURL }
    /// ```
    public static func start(
        port: Int = 0, configuration: Configuration = Configuration(), target: @escaping @Sendable () -> URL
    ) async throws -> FaultProxy {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        let proxy = FaultProxy(
            port: server.channel.localAddress?.port ?? port, listener: server.channel, target: target,
            configuration: configuration)
        let task = Task<Void, Never> {
            _ = try? await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        group.addTask { await proxy.serve(connection) }
                    }
                }
            }
        }
        proxy.acceptTask.withLock { $0 = task }
        return proxy
    }

    /// Stops listening, closes every connection (both sides), and lets held and delayed requests go.
    public func shutdown() async {
        let (channels, waiting) = state.withLock { state in
            state.isShutDown = true
            defer {
                state.held = [:]
                state.requestWaiters = []
            }
            return (
                Array(state.clientChannels.values) + Array(state.upstreamChannels.values),
                Array(state.held.values) + state.requestWaiters.map(\.continuation)
            )
        }
        for continuation in waiting { continuation.resume() }
        listener.close(promise: nil)
        for channel in channels { channel.close(promise: nil) }
        let task = acceptTask.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    // MARK: Faults

    /// Makes the next `times` requests of `operation` (of any request when nil) meet `fault`.
    public func inject(_ fault: Fault, into operation: DatabaseOperation? = nil, times: Int = 1) {
        state.withLock { $0.rules.append(Rule(fault: fault, operation: operation, remaining: times)) }
    }

    /// Decides the fault of every request that no injected fault claims.
    ///
    /// ```swift
    /// proxy.setPlan { request in
    ///     request.deviceID == "B" && request.operation == .recordsModify ? .dropResponse : .pass
    /// }
    /// ```
    public func setPlan(_ plan: @escaping @Sendable (Request) -> Fault) {
        state.withLock { $0.plan = plan }
    }

    /// Gives each request that nothing else claims a fault with probability `rate`, chosen from
    /// `faults`, by a generator seeded with `seed`: the same requests in the same order meet the
    /// same faults. `operations` limits the plan to some operations (nil: every request).
    public func setRandomFaults(
        seed: UInt64, rate: Double, faults: [Fault] = Fault.all, operations: Set<DatabaseOperation>? = nil
    ) {
        precondition(!faults.isEmpty, "a random plan needs at least one fault to choose from")
        state.withLock {
            $0.randomPlan = RandomPlan(
                random: SeededRandomNumberGenerator(seed: seed), rate: rate, faults: faults, operations: operations)
        }
    }

    /// Drops the injected faults, the plan and the random plan: every request passes from now on
    /// (a partition stays until it is lifted).
    public func removeFaults() {
        state.withLock { state in
            state.rules = []
            state.plan = nil
            state.randomPlan = nil
        }
    }

    /// While true, every request fails at once (its connection closes unanswered), as when the
    /// network between the client and the server is down. Turning it on also cuts the clients'
    /// open connections, so waiting long polls fail too.
    public var isPartitioned: Bool {
        get { state.withLock { $0.isPartitioned } }
        set {
            let channels = state.withLock { state -> [any Channel] in
                state.isPartitioned = newValue
                return newValue ? Array(state.clientChannels.values) : []
            }
            for channel in channels { channel.close(promise: nil) }
        }
    }

    /// What the proxy did so far.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Returns once `count` requests have arrived since the proxy started (at once if they have,
    /// or when the proxy shuts down); no real time passes.
    public func waitForRequests(count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.statistics.requests >= count || state.isShutDown { return true }
                state.requestWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// The fault for a request that has just arrived, counted; nil closes its connection at once.
    private func decide(_ request: HTTPRequestHead) -> (Fault?, Request) {
        let (fault, described, waiters) = state.withLock { state in
            let (fault, described) = Self.count(request, in: &state)
            return (fault, described, state.satisfiedWaiters())
        }
        for waiter in waiters { waiter.resume() }
        return (fault, described)
    }

    private static func count(_ request: HTTPRequestHead, in state: inout State) -> (Fault?, Request) {
        let described = Request(
            index: state.nextIndex, method: request.method.rawValue, uri: request.uri,
            deviceID: request.headers.first(name: WireHeader.device))
        state.nextIndex += 1
        state.statistics.requests += 1
        if state.isPartitioned || state.isShutDown {
            state.statistics.faults[.partitioned, default: 0] += 1
            return (nil, described)
        }
        let fault = Self.fault(for: described, in: &state)
        state.statistics.faults[fault.kind, default: 0] += 1
        return (fault, described)
    }

    private static func fault(for request: Request, in state: inout State) -> Fault {
        if let index = state.rules.firstIndex(where: { $0.operation == nil || $0.operation == request.operation }) {
            let fault = state.rules[index].fault
            state.rules[index].remaining -= 1
            if state.rules[index].remaining <= 0 { state.rules.remove(at: index) }
            return fault
        }
        if let plan = state.plan {
            let fault = plan(request)
            if fault != .pass { return fault }
        }
        guard var random = state.randomPlan,
            random.operations.map({ request.operation.map($0.contains) ?? false }) ?? true
        else { return .pass }
        defer { state.randomPlan = random }
        guard random.random.chance(random.rate) else { return .pass }
        return random.faults[Int.random(in: 0..<random.faults.count, using: &random.random)]
    }

    // MARK: Connections

    /// Serves one client connection: its requests one after the other, until a fault or the
    /// client closes it.
    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        let accepted = state.withLock { state -> Bool in
            guard !state.isShutDown else { return false }
            state.clientChannels[key] = channel
            return true
        }
        defer { state.withLock { _ = $0.clientChannels.removeValue(forKey: key) } }
        guard accepted else {
            try? await connection.channel.close()
            return
        }
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    body.clear()
                case .body(let chunk):
                    guard body.readableBytes + chunk.readableBytes <= configuration.maxBodyBytes else { return }
                    body.writeImmutableBuffer(chunk)
                case .end:
                    guard let request = head else { return }
                    head = nil
                    guard try await handle(request, body: body, outbound: outbound) else { return }
                }
            }
        }
    }

    /// Handles one whole request; answers whether the connection stays open.
    private func handle(
        _ head: HTTPRequestHead, body: ByteBuffer, outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    ) async throws -> Bool {
        let (fault, _) = decide(head)
        guard let fault else { return false }
        let keepAlive = head.isKeepAlive
        switch fault {
        case .dropRequest:
            return false
        case .throttle(let seconds):
            try await write(Self.errorResponse(.throttled, status: .tooManyRequests, retryAfter: seconds), to: outbound, keepAlive: keepAlive)
            return keepAlive
        case .unavailable(let seconds):
            try await write(
                Self.errorResponse(.tryAgainLater, status: .serviceUnavailable, retryAfter: seconds), to: outbound,
                keepAlive: keepAlive)
            return keepAlive
        case .dropResponse:
            _ = try? await forward(head, body: body)
            return false
        case .duplicateRequest:
            _ = try? await forward(head, body: body)
            guard let response = try? await forward(head, body: body) else { return false }
            try await write(response, to: outbound, keepAlive: keepAlive)
            return keepAlive
        case .cutResponse:
            guard let response = try? await forward(head, body: body) else { return false }
            try await write(response, to: outbound, keepAlive: false, cutting: true)
            return false
        case .pass, .delay, .reorder:
            if case .delay(let duration) = fault { try await configuration.clock.sleep(for: duration) }
            if case .reorder = fault { await holdUntilNextForward() }
            guard let response = try? await forward(head, body: body) else { return false }
            try await write(response, to: outbound, keepAlive: keepAlive)
            return keepAlive
        }
    }

    /// Waits until another request has been forwarded, or the hold timeout passed, or shutdown.
    private func holdUntilNextForward() async {
        let id = state.withLock { state in
            state.nextHoldID += 1
            return state.nextHoldID
        }
        let timeout = configuration.holdTimeout
        let timer = Task {
            try? await Task.sleep(for: timeout)
            state.withLock { $0.held.removeValue(forKey: id) }?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let release = state.withLock { state -> Bool in
                if state.isShutDown { return true }
                state.held[id] = continuation
                return false
            }
            if release { continuation.resume() }
        }
        timer.cancel()
    }

    /// Lets every held request go, once another request was forwarded.
    private func releaseHeld() {
        let held = state.withLock { state in
            defer { state.held = [:] }
            return Array(state.held.values)
        }
        for continuation in held { continuation.resume() }
    }

    // MARK: Answers

    /// An answer: its head and whole body.
    struct Response {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: ByteBuffer
    }

    private static func errorResponse(_ code: ServerErrorCode, status: HTTPResponseStatus, retryAfter: Int) -> Response {
        let error = ServerError(
            code, reason: "injected by FaultProxy: wait \(retryAfter) s", retryAfter: Double(retryAfter),
            uuid: UUID().uuidString.lowercased())
        let data = (try? WireCoding.encode(error)) ?? Data()
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        headers.add(name: WireHeader.retryAfter, value: String(retryAfter))
        return Response(status: status, headers: headers, body: ByteBuffer(bytes: data))
    }

    /// Writes an answer with a `Content-Length`; `cutting` sends only the first half of the body.
    private func write(
        _ response: Response, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, keepAlive: Bool,
        cutting: Bool = false
    ) async throws {
        var headers = response.headers
        headers.remove(name: "Transfer-Encoding")
        headers.remove(name: "Connection")
        headers.replaceOrAdd(name: "Content-Length", value: String(response.body.readableBytes))
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)))
        let body = cutting ? response.body.getSlice(at: response.body.readerIndex, length: response.body.readableBytes / 2)! : response.body
        if body.readableBytes > 0 { try await outbound.write(.body(.byteBuffer(body))) }
        if !cutting { try await outbound.write(.end(nil)) }
    }

    // MARK: Forwarding

    struct UpstreamClosed: Error {}

    /// Sends a request to the server on a new connection and collects its whole answer.
    private func forward(_ head: HTTPRequestHead, body: ByteBuffer) async throws -> Response {
        let target = state.withLock { $0.target }()
        let host = target.host ?? "127.0.0.1"
        let port = target.port ?? 80
        let connection = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(Self.timeAmount(configuration.connectTimeout))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        let open = state.withLock { state -> Bool in
            guard !state.isShutDown else { return false }
            state.upstreamChannels[key] = channel
            return true
        }
        defer { state.withLock { _ = $0.upstreamChannels.removeValue(forKey: key) } }
        guard open else {
            try? await channel.close()
            throw UpstreamClosed()
        }
        let timeout = channel.eventLoop.scheduleTask(in: Self.timeAmount(configuration.upstreamTimeout)) {
            channel.close(promise: nil)
        }
        defer { timeout.cancel() }

        var request = head
        // As a reverse proxy tells the server the host its client used, so that the URLs the
        // server hands out (asset uploads) lead back through the proxy.
        if let original = request.headers.first(name: "Host"), !request.headers.contains(name: "X-Forwarded-Host") {
            request.headers.add(name: "X-Forwarded-Host", value: original)
        }
        request.headers.replaceOrAdd(name: "Host", value: "\(host):\(port)")
        request.headers.remove(name: "Transfer-Encoding")
        request.headers.replaceOrAdd(name: "Content-Length", value: String(body.readableBytes))
        request.headers.replaceOrAdd(name: "Connection", value: "close")
        let maxBodyBytes = configuration.maxBodyBytes
        state.withLock { $0.statistics.forwarded += 1 }
        let response = try await connection.executeThenClose { inbound, outbound -> Response in
            try await outbound.write(.head(request))
            if body.readableBytes > 0 { try await outbound.write(.body(.byteBuffer(body))) }
            try await outbound.write(.end(nil))
            var responseHead: HTTPResponseHead?
            var collected = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let head):
                    responseHead = head
                case .body(let chunk):
                    guard collected.readableBytes + chunk.readableBytes <= maxBodyBytes else { throw UpstreamClosed() }
                    collected.writeImmutableBuffer(chunk)
                case .end:
                    guard let responseHead else { throw UpstreamClosed() }
                    return Response(status: responseHead.status, headers: responseHead.headers, body: collected)
                }
            }
            throw UpstreamClosed()
        }
        releaseHeld()
        return response
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
