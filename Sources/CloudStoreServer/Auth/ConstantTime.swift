import Foundation

/// Comparisons of secrets whose time does not depend on where they differ.
enum ConstantTime {
    /// Whether two byte strings are equal; the time depends on their length only.
    static func equal(_ lhs: some DataProtocol, _ rhs: some DataProtocol) -> Bool {
        let lhs = Array(lhs)
        let rhs = Array(rhs)
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<lhs.count { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}
