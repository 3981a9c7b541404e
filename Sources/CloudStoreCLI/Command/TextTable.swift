/// Rows of text in aligned columns, as `history`, `status` and `conflicts` print them.
///
/// ```swift
/// var table = TextTable()
/// table.append(["SEQ", "ENTITY", "PROPERTY"])
/// table.append(["1", "Note", "title"])
/// table.lines   // ["SEQ  ENTITY  PROPERTY", "1    Note    title"]
/// ```
struct TextTable {
    private(set) var rows: [[String]] = []
    /// Put before every line.
    var indent = ""

    init(_ rows: [[String]] = [], indent: String = "") {
        self.rows = rows
        self.indent = indent
    }

    mutating func append(_ row: [String]) {
        rows.append(row)
    }

    /// Each row with its columns padded to the widest cell of the column and two spaces between
    /// them; the last column is not padded and trailing spaces are trimmed.
    var lines: [String] {
        let columnCount = rows.map(\.count).max() ?? 0
        let widths = (0..<columnCount).map { column in
            rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        return rows.map { row in
            let cells = row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            var line = indent + cells.joined(separator: "  ")
            while line.last == " " { line.removeLast() }
            return line
        }
    }
}
