/// Numbers as the report lines of reliability suites print them.
///
/// ```swift
/// print("fuzz: cases \(ReportFormat.count(5000)), crashes 0")   // fuzz: cases 5,000, crashes 0
/// ```
public enum ReportFormat {
    /// `14,000`: thousands separated by commas, whatever the locale.
    public static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var groups: [Substring] = []
        var end = digits.endIndex
        while end > digits.startIndex {
            let start = digits.index(end, offsetBy: -3, limitedBy: digits.startIndex) ?? digits.startIndex
            groups.insert(digits[start..<end], at: 0)
            end = start
        }
        return (value < 0 ? "-" : "") + groups.joined(separator: ",")
    }
}
