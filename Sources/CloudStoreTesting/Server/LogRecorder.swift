import Foundation
import Logging
import Synchronization

/// A swift-log handler that keeps every message, so a test can wait until something was logged.
///
/// ```swift
/// let recorder = LogRecorder()
/// let server = try await TestServer.start(logger: recorder.logger(level: .debug))
/// // ... start a long poll ...
/// await recorder.waitFor("long poll waiting")
/// ```
public final class LogRecorder: Sendable {
    private struct State {
        var messages: [String] = []
        var waiters: [(text: String, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Every message logged so far, as `level message key=value …` (metadata sorted by key).
    public var messages: [String] { state.withLock { $0.messages } }

    /// A logger that records into this recorder.
    public func logger(label: String = "cloudstore.test", level: Logger.Level = .debug) -> Logger {
        var logger = Logger(label: label) { _ in Handler(recorder: self) }
        logger.logLevel = level
        return logger
    }

    /// Returns once a message containing `text` was logged (at once if one already was).
    public func waitFor(_ text: String) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.messages.contains(where: { $0.contains(text) }) { return true }
                state.waiters.append((text, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    fileprivate func record(_ message: String) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.messages.append(message)
            let ready = state.waiters.filter { message.contains($0.text) }.map(\.continuation)
            state.waiters.removeAll { message.contains($0.text) }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }
            recorder.record((["\(event.level) \(event.message)"] + fields.map { "\($0.key)=\($0.value)" }).joined(separator: " "))
        }
    }
}
