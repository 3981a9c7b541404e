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
        var waiters: [(texts: [String], continuation: CheckedContinuation<String, Never>)] = []
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
        _ = await waitFor(anyOf: [text])
    }

    /// Returns the first of `texts` that a logged message contains, once one does (at once if one
    /// already does): a test waits for what it expects or for the sign that it will never come.
    public func waitFor(anyOf texts: [String]) async -> String {
        await withCheckedContinuation { continuation in
            let found = state.withLock { state -> String? in
                for message in state.messages {
                    if let text = texts.first(where: message.contains) { return text }
                }
                state.waiters.append((texts, continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }

    fileprivate func record(_ message: String) {
        let ready = state.withLock { state -> [(String, CheckedContinuation<String, Never>)] in
            state.messages.append(message)
            var ready: [(String, CheckedContinuation<String, Never>)] = []
            state.waiters.removeAll { waiter in
                guard let text = waiter.texts.first(where: message.contains) else { return false }
                ready.append((text, waiter.continuation))
                return true
            }
            return ready
        }
        for (text, continuation) in ready { continuation.resume(returning: text) }
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
