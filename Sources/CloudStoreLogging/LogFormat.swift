import Logging

/// How log lines write values, the same in every subsystem.
public enum LogFormat {
    /// A duration as log lines write it: milliseconds with one decimal below ten seconds
    /// (`0.4 ms`, `12.3 ms`, `2503.1 ms`), whole seconds with one decimal above (`12.5 s`).
    ///
    /// ```swift
    /// logger.notice("store opened", metadata: ["duration": "\(LogFormat.duration(clock.now - started))"])
    /// ```
    public static func duration(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        if milliseconds < 10_000 {
            return "\((milliseconds * 10).rounded() / 10) ms"
        }
        return "\((milliseconds / 100).rounded() / 10) s"
    }

    /// ``duration(_:)`` for a time interval in seconds.
    public static func duration(seconds: Double) -> String {
        duration(.milliseconds(Int64((seconds * 1000).rounded())) + .nanoseconds(0))
    }
}

extension Logger {
    /// The logger to hand a library (AsyncHTTPClient, PostgresNIO, ...): its lines appear only at
    /// level 4 (`.trace`), marked `from=<library>`, so levels 1 to 3 show CloudStore's own lines.
    ///
    /// ```swift
    /// let response = try await client.execute(request, timeout: timeout, logger: logger.forLibrary("async-http-client"))
    /// ```
    public func forLibrary(_ name: String) -> Logger {
        var library = self
        library[metadataKey: "from"] = "\(name)"
        if library.logLevel > .trace { library.logLevel = .critical }
        return library
    }
}
