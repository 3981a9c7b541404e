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
