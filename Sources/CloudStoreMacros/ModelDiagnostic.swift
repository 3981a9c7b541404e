import SwiftDiagnostics
import SwiftSyntax

/// A problem `@Model` reports at compile time: what is wrong and what to write instead.
struct ModelDiagnostic: DiagnosticMessage {
    let message: String
    let id: String
    let severity: DiagnosticSeverity

    init(_ id: String, _ message: String, severity: DiagnosticSeverity = .error) {
        self.id = id
        self.message = message
        self.severity = severity
    }

    var diagnosticID: MessageID { MessageID(domain: "CloudStoreMacros", id: id) }
}

/// The message of a fix-it.
struct ModelFixIt: FixItMessage {
    let message: String
    let id: String

    init(_ id: String, _ message: String) {
        self.id = id
        self.message = message
    }

    var fixItID: MessageID { MessageID(domain: "CloudStoreMacros", id: id) }
}

extension ModelDeclaration {
    mutating func error(
        _ node: some SyntaxProtocol, _ id: String, _ message: String, fixIts: [FixIt] = []
    ) {
        diagnostics.append(Diagnostic(node: Syntax(node), message: ModelDiagnostic(id, message), fixIts: fixIts))
    }
}

extension FixIt {
    /// A fix-it that replaces one node.
    static func replace(_ id: String, _ message: String, _ old: some SyntaxProtocol, with new: some SyntaxProtocol) -> FixIt {
        FixIt(message: ModelFixIt(id, message), changes: [.replace(oldNode: Syntax(old), newNode: Syntax(new))])
    }
}
