/// A random number generator that gives the same numbers for the same seed on every machine
/// (SplitMix64), so a randomised test can be replayed from the seed it prints.
///
/// ```swift
/// let seed = ReliabilityRun.seed(fixed: 42, variable: "MYAPP_SEED")
/// var random = SeededRandomNumberGenerator(seed: seed)
/// print("seed \(seed)")                       // rerun with MYAPP_SEED=<seed>
/// let value = Int.random(in: 0..<10, using: &random)
/// ```
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    public let seed: UInt64
    private var state: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `probability`.
    public mutating func chance(_ probability: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < probability
    }
}
