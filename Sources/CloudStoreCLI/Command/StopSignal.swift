import Dispatch
import Foundation
import Synchronization

/// When a long-running command (`serve`) should stop: on SIGTERM or SIGINT when the command runs
/// as the process, or when the task running it is cancelled (a test or an app running it inside).
///
/// Create it before the work starts, so that a signal arriving early is not lost:
///
/// ```swift
/// let stop = StopSignal(handlingSignals: context.handlesSignals)
/// let server = try await CloudServer.start(configuration: configuration)
/// await stop.wait()
/// try await server.shutdown()
/// ```
///
/// From its creation until ``wait()`` returns, those signals no longer end the process at once;
/// afterwards they do again, so a second Ctrl-C during a graceful shutdown ends it.
public struct StopSignal {
    private let gate = Gate()
    private let signals: [Int32]
    private let sources: [any DispatchSourceSignal]

    public init(handlingSignals: Bool) {
        signals = handlingSignals ? [SIGTERM, SIGINT] : []
        sources = signals.map { [gate] number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { gate.open() }
            source.resume()
            return source
        }
    }

    /// Returns once a signal arrived or the task is cancelled (at once if either happened already).
    public func wait() async {
        await withTaskCancellationHandler {
            await gate.wait()
        } onCancel: { [gate] in
            gate.open()
        }
        for source in sources { source.cancel() }
        for number in signals { signal(number, SIG_DFL) }
    }
}

/// Opens once; waiting on an open gate returns at once.
private final class Gate: Sendable {
    private enum State {
        case closed(CheckedContinuation<Void, Never>?)
        case open
    }

    private let state = Mutex(State.closed(nil))

    func open() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .closed(let waiter) = state else { return nil }
            state = .open
            return waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state -> Bool in
                guard case .closed = state else { return true }
                state = .closed(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
    }
}
