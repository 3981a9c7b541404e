import SwiftCompilerPlugin
import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@Model`: makes a struct a `PersistentModel`, deriving its entity description, its typed table
/// of properties and its row reader and writer from its stored properties.
public struct ModelMacro: ExtensionMacro, MemberMacro {
    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol, conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        let model = ModelDeclaration(reading: declaration, attribute: node)
        for diagnostic in model.diagnostics { context.diagnose(diagnostic) }
        guard model.isValid else { return [] }
        return [try ModelCode(model: model).conformance(of: type, addingConformance: !protocols.isEmpty)]
    }

    public static func expansion(
        of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        // Diagnostics come from the extension's expansion, once.
        let model = ModelDeclaration(reading: declaration, attribute: node)
        guard model.isValid, model.hasTransientProperties, !model.declaresCodingKeys else { return [] }
        return [ModelCode(model: model).codingKeys]
    }
}

/// `@Attribute`, `@Relationship` and `@Transient` mark properties for `@Model`, which reads them;
/// on their own they add nothing, and outside a `@Model` type they warn that they do nothing.
public struct PropertyMarkerMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        let enclosing = context.lexicalContext.first
        let attributes = enclosing?.as(StructDeclSyntax.self)?.attributes ?? enclosing?.as(ExtensionDeclSyntax.self)?.attributes
        let isInModel = attributes?.contains { element in
            let name = element.as(AttributeSyntax.self)?.attributeName.trimmedDescription
            return name == "Model" || name == "CloudStore.Model"
        } ?? false
        if !isInModel {
            let name = node.attributeName.trimmedDescription
            context.diagnose(
                Diagnostic(
                    node: node,
                    message: ModelDiagnostic(
                        "markerOutsideModel", "@\(name) has an effect only on a stored property of a @Model struct",
                        severity: .warning)))
        }
        return []
    }
}

@main
struct CloudStoreMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [ModelMacro.self, PropertyMarkerMacro.self]
}
