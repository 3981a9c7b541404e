import Foundation
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The open connections of a server and which of them are idle, for the decision of which
/// connection to close when there are too many.
///
/// A connection is idle between requests (keep-alive) and before its first request arrives; it
/// is busy from a request's head until its response ends (a long poll is busy). When a new
/// connection makes the count exceed the capacity, the connection idle longest is closed, so that
/// whoever holds many idle connections loses their own, and a new client is served; when none is
/// idle, the new connection is closed. The table is pure: ``ConnectionLimit`` applies its answers.
struct ConnectionTable: Sendable {
    /// What to close, by connection number.
    enum Eviction: Hashable, Sendable {
        case none
        case close(Int)
    }

    let capacity: Int
    private var idleSince: [Int: UInt64] = [:]
    private var busy: Set<Int> = []
    private var nextNumber = 0
    private var tick: UInt64 = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a server must accept some connections")
        self.capacity = capacity
    }

    var count: Int { idleSince.count + busy.count }

    /// Registers a new connection; answers its number and what to close to stay within capacity.
    mutating func open() -> (number: Int, eviction: Eviction) {
        let number = nextNumber
        nextNumber += 1
        tick += 1
        idleSince[number] = tick
        guard count > capacity else { return (number, .none) }
        let longestIdle = idleSince.filter { $0.key != number }.min { $0.value < $1.value }?.key
        return (number, .close(longestIdle ?? number))
    }

    mutating func requestStarted(_ number: Int) {
        guard idleSince.removeValue(forKey: number) != nil else { return }
        busy.insert(number)
    }

    mutating func responseEnded(_ number: Int) {
        guard busy.remove(number) != nil else { return }
        tick += 1
        idleSince[number] = tick
    }

    mutating func closed(_ number: Int) {
        idleSince[number] = nil
        busy.remove(number)
    }
}

/// Keeps the number of open connections within ``ServerLimits/maxConnections`` (and below the
/// process's descriptor limit), closing the connection idle longest when a new one arrives at the
/// limit: hundreds of idle connections held by one client cannot lock other clients out.
final class ConnectionLimit: Sendable {
    private struct State {
        var table: ConnectionTable
        var channels: [Int: any Channel] = [:]
    }

    private let state: Mutex<State>

    init(capacity: Int) {
        state = Mutex(State(table: ConnectionTable(capacity: capacity)))
    }

    var capacity: Int { state.withLock { $0.table.capacity } }

    /// Descriptors kept from connections for the storage and the process: 64 for the listener,
    /// logs and files, and on SQLite 16 per container (its pool holds up to 14: a writer and
    /// readers, each with the database and its WAL), on PostgreSQL 16 for its pool, however many
    /// containers it serves.
    static func reservedDescriptors(for storage: ServerConfiguration.Storage, containers: Int) -> Int {
        switch storage {
        case .sqlite: 64 + 16 * containers
        case .postgres: 64 + 16
        }
    }

    /// The capacity for a configured maximum: at most the descriptors the process may open, less a
    /// reserve for storage files and the listener, and never below 16.
    static func capacity(maxConnections: Int, descriptorLimit: Int?, reservedDescriptors: Int) -> Int {
        guard let descriptorLimit else { return maxConnections }
        return min(maxConnections, max(16, descriptorLimit - reservedDescriptors))
    }

    /// The soft limit on open descriptors of this process, if any.
    static var descriptorLimit: Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// A handler for one connection's pipeline (after HTTP decoding).
    func handler() -> ConnectionLimitHandler { ConnectionLimitHandler(limit: self) }

    fileprivate func open(_ channel: any Channel) -> Int {
        let (number, toClose) = state.withLock { state -> (Int, (any Channel)?) in
            let (number, eviction) = state.table.open()
            state.channels[number] = channel
            guard case .close(let victim) = eviction else { return (number, nil) }
            state.table.closed(victim)
            return (number, state.channels.removeValue(forKey: victim))
        }
        toClose?.close(promise: nil)
        return number
    }

    fileprivate func requestStarted(_ number: Int) { state.withLock { $0.table.requestStarted(number) } }
    fileprivate func responseEnded(_ number: Int) { state.withLock { $0.table.responseEnded(number) } }

    fileprivate func closed(_ number: Int) {
        state.withLock { state in
            state.table.closed(number)
            state.channels[number] = nil
        }
    }
}

/// Reports one connection's requests and responses to its ``ConnectionLimit``.
final class ConnectionLimitHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limit: ConnectionLimit
    private var number: Int?

    init(limit: ConnectionLimit) {
        self.limit = limit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { register(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        register(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let number { limit.closed(number) }
        number = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data), let number { limit.requestStarted(number) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), let number { limit.responseEnded(number) }
        context.write(data, promise: promise)
    }

    private func register(_ context: ChannelHandlerContext) {
        guard number == nil else { return }
        number = limit.open(context.channel)
    }
}

@available(*, unavailable)
extension ConnectionLimitHandler: Sendable {}
