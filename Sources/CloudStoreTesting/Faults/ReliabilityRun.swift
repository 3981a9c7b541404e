import Foundation

/// How big a randomised test's run is, and its seed: small and fixed in CI so every run checks the
/// same cases, large and fresh in a soak run (`CLOUDSTORE_SOAK=1`), and replayable from a printed
/// seed through an environment variable.
///
/// ```swift
/// let seed = ReliabilityRun.seed(fixed: 42)                     // CLOUDSTORE_FUZZ_SEED replays one
/// let cases = ReliabilityRun.count(ci: 500, soak: 50_000)
/// print("fuzz: seed \(seed), cases \(cases)")
/// ```
public enum ReliabilityRun {
    /// Whether `CLOUDSTORE_SOAK=1` asks for a long run.
    public static var isSoak: Bool { ProcessInfo.processInfo.environment["CLOUDSTORE_SOAK"] == "1" }

    /// The seed in `variable` when it is set; else a fresh random seed in a soak run, else `fixed`.
    public static func seed(fixed: UInt64, variable: String = "CLOUDSTORE_FUZZ_SEED") -> UInt64 {
        if let seed = ProcessInfo.processInfo.environment[variable].flatMap(UInt64.init) { return seed }
        return isSoak ? UInt64.random(in: 0...UInt64.max) : fixed
    }

    /// The time limit, in minutes, of a suite that does real I/O (servers, processes, stores):
    /// 240 in a soak run, else 10.
    ///
    /// A time limit is there to end a hang, not to time a test. In the parallel run of every
    /// suite on a small machine (CI has 2 cores) a test can wait minutes for the machine before it
    /// finishes, so a limit shorter than a whole run (about 6 minutes) calls a slow test hung; 10
    /// minutes still ends a real hang well within CI's 90.
    ///
    /// ```swift
    /// @Suite(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) struct ServerTests { … }
    /// ```
    public static var hangLimitMinutes: Int { isSoak ? 240 : 10 }

    /// `soak` in a soak run, else `ci`.
    public static func count(ci: Int, soak: Int) -> Int { isSoak ? soak : ci }
}
