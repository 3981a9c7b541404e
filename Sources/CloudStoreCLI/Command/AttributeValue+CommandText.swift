import CloudStore

extension AttributeValue {
    /// The value as commands print it: a string in double quotes with only `"`, `\` and control
    /// characters escaped (`"B's title"`), anything else as its description.
    var commandText: String {
        guard case .string(let text) = self else { return description }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where scalar.value < 0x20: escaped += "\\u{\(String(scalar.value, radix: 16))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return "\"\(escaped)\""
    }
}
