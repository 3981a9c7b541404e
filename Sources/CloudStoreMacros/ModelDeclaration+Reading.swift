import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder

extension ModelDeclaration {
    /// Reads a declaration `@Model` is attached to, collecting every problem as a diagnostic.
    init(reading declaration: some DeclGroupSyntax, attribute: AttributeSyntax) {
        guard let structDeclaration = declaration.as(StructDeclSyntax.self) else {
            self.init(typeName: "")
            error(
                attribute, "notAStruct",
                "@Model applies to a struct: CloudStore's objects are values, read from and written to the store")
            return
        }
        self.init(typeName: structDeclaration.name.trimmedDescription)
        if let generics = structDeclaration.genericParameterClause {
            error(generics, "generic", "a @Model type cannot be generic: its entity has one set of attribute types")
        }
        let modifiers = structDeclaration.modifiers.map(\.name.tokenKind)
        if modifiers.contains(.keyword(.public)) || modifiers.contains(.keyword(.open)) {
            access = "public"
        } else if modifiers.contains(.keyword(.package)) {
            access = "package"
        }
        readArguments(of: attribute)

        var idDeclared = false
        for member in structDeclaration.memberBlock.members {
            if let nested = member.decl.as(EnumDeclSyntax.self), nested.name.text == "CodingKeys" {
                declaresCodingKeys = true
            }
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            if variable.modifiers.contains(where: { [.keyword(.static), .keyword(.class)].contains($0.name.tokenKind) }) {
                continue
            }
            for binding in variable.bindings {
                guard let pattern = binding.pattern.as(IdentifierPatternSyntax.self) else { continue }
                let name = String(pattern.identifier.text.filter { $0 != "`" })
                if name == "id" {
                    idDeclared = true
                    readID(binding, in: variable)
                } else {
                    readProperty(binding, named: name, in: variable)
                }
            }
        }
        if !idDeclared {
            let indentation = structDeclaration.memberBlock.members.first?.leadingTrivia ?? [.newlines(1), .spaces(4)]
            let id = MemberBlockItemSyntax(decl: DeclSyntax("var id = UUID.timeOrdered()")).with(\.leadingTrivia, indentation)
            var members = structDeclaration.memberBlock.members
            members.insert(id, at: members.startIndex)
            error(
                structDeclaration.name, "missingID",
                "\(typeName) has no id: every object needs a UUID id, its record name in the cloud; declare `var id = UUID.timeOrdered()`",
                fixIts: [.replace("addID", "add `var id = UUID.timeOrdered()`", structDeclaration.memberBlock.members, with: members)])
        }
        checkIndexNames()
    }

    // MARK: @Model's arguments

    private mutating func readArguments(of attribute: AttributeSyntax) {
        guard case .argumentList(let arguments)? = attribute.arguments else { return }
        for argument in arguments {
            switch argument.label?.text {
            case "name":
                entityName = stringLiteral(argument.expression, what: "@Model(name:)")
            case "originalName":
                originalName = stringLiteral(argument.expression, what: "@Model(originalName:)")
            case "mirrored":
                if let literal = argument.expression.as(BooleanLiteralExprSyntax.self) {
                    isMirrored = literal.literal.tokenKind == .keyword(.true)
                } else {
                    error(argument.expression, "notLiteral", "@Model(mirrored:) takes `true` or `false`")
                }
            case "indexes":
                indexes = nameLists(argument.expression, what: "indexes")
            case "uniquenessConstraints":
                uniquenessConstraints = nameLists(argument.expression, what: "uniquenessConstraints")
            case "duplicateKeyRule":
                duplicateKeyRule = argument.expression.trimmedDescription
            default:
                break
            }
        }
    }

    private mutating func stringLiteral(_ expression: ExprSyntax, what: String) -> String? {
        guard let literal = expression.as(StringLiteralExprSyntax.self), literal.segments.count == 1,
            case .stringSegment(let segment)? = literal.segments.first
        else {
            error(expression, "notLiteral", "\(what) takes a string literal")
            return nil
        }
        return segment.content.text
    }

    /// `[["pinned", "created"], ["folder"]]`: lists of property names, checked against the stored
    /// properties once they are read. (Names, not key paths: a key path to the type in its own
    /// attribute would make the compiler resolve the type's macros while expanding them.)
    private mutating func nameLists(_ expression: ExprSyntax, what: String) -> [[String]] {
        guard let outer = expression.as(ArrayExprSyntax.self) else {
            error(expression, "notLiteral", "@Model(\(what):) takes an array literal of property name lists, as [[\"title\"]]")
            return []
        }
        var lists: [[String]] = []
        for element in outer.elements {
            guard let inner = element.expression.as(ArrayExprSyntax.self) else {
                error(element.expression, "notLiteral", "each of @Model(\(what):) is an array of property names, as [\"title\"]")
                continue
            }
            var names: [String] = []
            for item in inner.elements {
                if let name = stringLiteral(item.expression, what: "@Model(\(what):)") {
                    names.append(name)
                    indexNameNodes.append((name, Syntax(item.expression)))
                }
            }
            if !names.isEmpty { lists.append(names) }
        }
        return lists
    }

    /// The property a key path literal names: `\Note.title` (or `\.title` when `root` is the model
    /// itself) gives `title`; nil, with a diagnostic, for anything else.
    mutating func keyPathProperty(_ expression: ExprSyntax, root: String?, what: String) -> String? {
        guard let keyPath = expression.as(KeyPathExprSyntax.self), keyPath.components.count == 1,
            let property = keyPath.components.first?.component.as(KeyPathPropertyComponentSyntax.self)
        else {
            error(expression, "keyPath", "\(what) takes a key path to one stored property, as \\\(root ?? "Type").property")
            return nil
        }
        if let root, let written = keyPath.root?.trimmedDescription, written != root, written != "Self" {
            error(keyPath, "keyPathRoot", "\(what) names a property of \(written), but it must name one of \(root)")
            return nil
        }
        return property.declName.baseName.text
    }

    // MARK: Properties

    private mutating func readID(_ binding: PatternBindingSyntax, in variable: VariableDeclSyntax) {
        codableNames.append("id")
        let type = binding.typeAnnotation?.type.trimmedDescription
        let initializer = binding.initializer?.value
        let isUUID: Bool
        if let type {
            isUUID = ["UUID", "Foundation.UUID", "Self.ID", "ID", "\(typeName).ID"].contains(type)
        } else if let initializer {
            isUUID = Self.inferredType(of: initializer) == "UUID"
        } else {
            isUUID = false
        }
        if !isUUID {
            error(
                binding.typeAnnotation.map { Syntax($0.type) } ?? Syntax(binding.pattern), "idType",
                "the id must be a UUID (the object's record name); declare `var id = UUID.timeOrdered()`")
        }
        if variable.bindingSpecifier.tokenKind == .keyword(.let), binding.initializer != nil {
            error(
                variable.bindingSpecifier, "letWithValue",
                "a `let` with an initial value cannot take the value read from the store; declare it with `var`",
                fixIts: [.replace("letToVar", "use `var`", variable.bindingSpecifier, with: TokenSyntax.keyword(.var, trailingTrivia: .space))])
        }
    }

    private mutating func readProperty(_ binding: PatternBindingSyntax, named name: String, in variable: VariableDeclSyntax) {
        let attributes = PropertyAttributes(variable.attributes)
        let isComputed = binding.accessorBlock.map(Self.isComputed) ?? false
        if isComputed {
            for (node, macro) in attributes.markers {
                error(
                    node, "computed",
                    "\(name) is a computed property, which the store does not keep; remove @\(macro), or make it a stored property",
                    fixIts: [removal(of: node, in: variable, "remove @\(macro)")])
            }
            return
        }
        if let transient = attributes.transient {
            hasTransientProperties = true
            if binding.initializer == nil {
                error(
                    transient, "transientWithoutValue",
                    "a @Transient property needs an initial value: it is not stored, so an object read from the store has this value")
            }
            return
        }
        codableNames.append(name)
        if variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.lazy) }) {
            error(variable, "lazy", "a lazy property cannot be stored; mark it @Transient")
            return
        }
        if variable.bindingSpecifier.tokenKind == .keyword(.let), binding.initializer != nil {
            error(
                variable.bindingSpecifier, "letWithValue",
                "a `let` with an initial value cannot take the value read from the store; declare \(name) with `var`",
                fixIts: [.replace("letToVar", "use `var`", variable.bindingSpecifier, with: TokenSyntax.keyword(.var, trailingTrivia: .space))])
        }
        let written: TypeSyntax
        if let annotation = binding.typeAnnotation?.type {
            written = annotation
        } else if let initializer = binding.initializer?.value, let inferred = Self.inferredType(of: initializer) {
            written = TypeSyntax(stringLiteral: inferred)
        } else {
            error(
                binding.pattern, "untyped",
                "declare the type of \(name) (`var \(name): Type = …`): @Model reads it to choose the attribute type")
            return
        }
        guard var property = classify(written, named: name, binding: binding, variable: variable) else { return }
        apply(attributes, to: &property, binding: binding, variable: variable)
        properties.append(property)
    }

    /// The property's kind from its declared type, or nil (with a diagnostic) when it cannot be stored.
    private mutating func classify(
        _ type: TypeSyntax, named name: String, binding: PatternBindingSyntax, variable: VariableDeclSyntax
    ) -> StoredProperty? {
        var inner = type
        var isOptional = false
        if let wrapped = Self.optionalWrapped(type) {
            inner = wrapped
            isOptional = true
        } else if type.is(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
            error(type, "unsupportedType", "\(name): implicitly unwrapped optionals are not stored; declare it as an optional (`?`)")
            return nil
        }
        if Self.optionalWrapped(inner) != nil {
            error(type, "unsupportedType", "\(name): a nested optional cannot be stored; declare one `?`")
            return nil
        }
        // Relationships: `Folder.ID?` and `[Tag.ID]`.
        if let member = inner.as(MemberTypeSyntax.self), member.name.text == "ID" {
            let destination = member.baseType.trimmedDescription
            if !isOptional {
                error(
                    type, "toOneNotOptional",
                    "\(name) is a to-one relationship, which may always be nil (its object deleted, or not fetched yet); declare it as \(destination).ID?",
                    fixIts: [.replace("makeOptional", "declare it as \(destination).ID?", type, with: OptionalTypeSyntax(wrappedType: type.trimmed).with(\.trailingTrivia, type.trailingTrivia))])
                return nil
            }
            return StoredProperty(name: name, kind: .toOne(destination: destination))
        }
        if let element = Self.arrayElement(inner), let member = element.as(MemberTypeSyntax.self), member.name.text == "ID" {
            let destination = member.baseType.trimmedDescription
            if isOptional {
                error(
                    type, "toManyOptional",
                    "\(name) is a to-many relationship, which is never nil (empty when it relates nothing); declare it as [\(destination).ID] = []",
                    fixIts: [.replace("notOptional", "declare it as [\(destination).ID]", type, with: inner.trimmed.with(\.trailingTrivia, type.trailingTrivia))])
                return nil
            }
            return StoredProperty(name: name, kind: .toMany(destination: destination))
        }
        if let identifier = inner.as(IdentifierTypeSyntax.self), identifier.name.text == "Set",
            let argument = identifier.genericArgumentClause?.arguments.first,
            argument.argument.trimmedDescription.hasSuffix(".ID")
        {
            let element = argument.argument.trimmedDescription
            error(type, "toManyNotArray", "\(name): a to-many relationship is declared as an array, [\(element)]")
            return nil
        }
        if let reason = Self.unsupportedReason(inner) {
            error(type, "unsupportedType", "\(name) cannot be stored: \(reason)")
            return nil
        }
        var property = StoredProperty(name: name, kind: .attribute(type: inner.trimmedDescription, isOptional: isOptional))
        property.defaultLiteral = defaultLiteral(binding.initializer?.value, type: inner.trimmedDescription)
        if !isOptional && property.defaultLiteral == nil && isMirrored {
            requireDefault(name, type: type, inner: inner.trimmedDescription, binding: binding)
        }
        return property
    }

    /// A mirrored entity's attribute is optional or has a default: a record from another device or
    /// an older version of the app may lack it.
    private mutating func requireDefault(_ name: String, type: TypeSyntax, inner: String, binding: PatternBindingSyntax) {
        var fixIts: [FixIt] = []
        if let annotation = binding.typeAnnotation {
            fixIts.append(
                .replace(
                    "makeOptional", "declare it as \(inner)?", annotation.type,
                    with: OptionalTypeSyntax(wrappedType: annotation.type.trimmed).with(\.trailingTrivia, annotation.type.trailingTrivia)))
            if binding.initializer == nil, let literal = Self.naturalDefault[inner] {
                let withDefault = binding.with(\.typeAnnotation, annotation.with(\.type, annotation.type.trimmed.with(\.trailingTrivia, .space)))
                    .with(\.initializer, InitializerClauseSyntax(equal: .equalToken(trailingTrivia: .space), value: ExprSyntax(stringLiteral: literal)))
                fixIts.append(.replace("addDefault", "give it the default \(literal)", binding, with: withDefault))
            }
        } else {
            let annotated = binding.with(\.pattern, binding.pattern.trimmed)
                .with(\.typeAnnotation, TypeAnnotationSyntax(colon: .colonToken(trailingTrivia: .space), type: TypeSyntax(stringLiteral: "\(inner)? ")))
            fixIts.append(.replace("makeOptional", "declare it as \(inner)?", binding, with: annotated))
        }
        error(
            binding.pattern, "mirroredWithoutDefault",
            "\(name) needs a literal default or an optional type: a mirrored entity may receive records without it (from another device or an older version of the app); declare it as \(inner)? or give it a literal default, or mark the entity @Model(mirrored: false)",
            fixIts: fixIts)
    }

    static let naturalDefault: [String: String] = [
        "String": "\"\"", "Int": "0", "Int64": "0", "Int32": "0", "Int16": "0", "Int8": "0", "UInt8": "0",
        "UInt16": "0", "UInt32": "0", "Double": "0", "Float": "0", "Decimal": "0", "Bool": "false",
    ]

    /// The initial value as the schema's default, when it is one the schema can keep: a literal of
    /// the property's type, or for other types (raw-value enums, JSON values) a literal or a member
    /// such as `.medium`. Calls (`Date()`, `UUID()`) give a value per object, not a default.
    private func defaultLiteral(_ value: ExprSyntax?, type: String) -> String? {
        guard let value, !value.is(NilLiteralExprSyntax.self) else { return nil }
        if KnownType.attributeTypes[type] != nil {
            return KnownType.literalFits(value, type) ? value.trimmedDescription : nil
        }
        if let string = value.as(StringLiteralExprSyntax.self) {
            return string.segments.allSatisfy({ $0.is(StringSegmentSyntax.self) }) ? value.trimmedDescription : nil
        }
        if KnownType.isInteger(value) || KnownType.isFloat(value) || value.is(BooleanLiteralExprSyntax.self)
            || value.is(ArrayExprSyntax.self) || value.is(DictionaryExprSyntax.self)
        {
            return value.trimmedDescription
        }
        if let member = value.as(MemberAccessExprSyntax.self), member.declName.argumentNames == nil {
            return value.trimmedDescription
        }
        return nil
    }

    // MARK: Property attributes

    private mutating func apply(
        _ attributes: PropertyAttributes, to property: inout StoredProperty, binding: PatternBindingSyntax,
        variable: VariableDeclSyntax
    ) {
        let name = property.name
        if let attribute = attributes.attribute {
            if case .attribute(let type, _) = property.kind {
                readAttributeArguments(attribute, into: &property, type: type)
            } else {
                error(
                    attribute, "attributeOnRelationship",
                    "\(name) is a relationship; its options go in @Relationship(deleteRule:inverse:originalName:)",
                    fixIts: [removal(of: attribute, in: variable, "remove @Attribute")])
            }
        }
        if let relationship = attributes.relationship {
            switch property.kind {
            case .attribute(let type, _):
                error(
                    relationship, "relationshipOnAttribute",
                    "\(name) is an attribute (\(type)); a relationship is declared as Destination.ID? (to-one) or [Destination.ID] (to-many)")
            case .toOne(let destination), .toMany(let destination):
                readRelationshipArguments(relationship, into: &property, destination: destination)
            }
        }
    }

    private mutating func readAttributeArguments(_ attribute: AttributeSyntax, into property: inout StoredProperty, type: String) {
        guard case .argumentList(let arguments)? = attribute.arguments else { return }
        for argument in arguments {
            if argument.label?.text == "originalName" {
                property.originalName = stringLiteral(argument.expression, what: "@Attribute(originalName:)")
                continue
            }
            guard argument.label == nil, let member = argument.expression.as(MemberAccessExprSyntax.self) else { continue }
            let option = member.declName.baseName.text
            property.options.insert(option)
            switch option {
            case "externalStorage" where type != "Data" && type != "Foundation.Data":
                error(argument.expression, "externalStorageType", "\(property.name): external storage keeps the bytes of a Data attribute in a file; \(type) is not Data")
            default:
                break
            }
        }
    }

    private mutating func readRelationshipArguments(
        _ attribute: AttributeSyntax, into property: inout StoredProperty, destination: String
    ) {
        guard case .argumentList(let arguments)? = attribute.arguments else { return }
        for argument in arguments {
            switch argument.label?.text {
            case "deleteRule":
                property.deleteRule = argument.expression.trimmedDescription
                if isMirrored, argument.expression.as(MemberAccessExprSyntax.self)?.declName.baseName.text == "deny" {
                    error(
                        argument.expression, "denyMirrored",
                        "\(property.name): the deny delete rule cannot hold in a mirrored entity (another device may delete the object anyway); use .nullify or .cascade")
                }
            case "inverse":
                property.inverse = keyPathProperty(argument.expression, root: destination, what: "@Relationship(inverse:)")
            case "originalName":
                property.originalName = stringLiteral(argument.expression, what: "@Relationship(originalName:)")
            default:
                break
            }
        }
    }

    /// A fix-it that removes one attribute from a declaration.
    private func removal(of attribute: AttributeSyntax, in variable: VariableDeclSyntax, _ message: String) -> FixIt {
        let kept = variable.attributes.filter { $0.as(AttributeSyntax.self) != attribute }
        return .replace("removeAttribute", message, variable, with: variable.with(\.attributes, kept))
    }

    // MARK: Indexes

    private mutating func checkIndexNames() {
        let indexable = Set(properties.compactMap { property -> String? in
            if case .toMany = property.kind { return nil }
            return property.name
        })
        for (name, node) in indexNameNodes where !indexable.contains(name) {
            error(
                node, "indexName",
                "\(typeName).\(name) is not a stored attribute or to-one relationship, so it cannot be indexed")
        }
    }

    // MARK: Types

    /// The wrapped type of `T?` or `Optional<T>`.
    static func optionalWrapped(_ type: TypeSyntax) -> TypeSyntax? {
        if let optional = type.as(OptionalTypeSyntax.self) { return optional.wrappedType }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Optional",
            let argument = identifier.genericArgumentClause?.arguments.first
        {
            return TypeSyntax(argument.argument)
        }
        return nil
    }

    /// The element type of `[T]` or `Array<T>`.
    static func arrayElement(_ type: TypeSyntax) -> TypeSyntax? {
        if let array = type.as(ArrayTypeSyntax.self) { return array.element }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Array",
            let argument = identifier.genericArgumentClause?.arguments.first
        {
            return TypeSyntax(argument.argument)
        }
        return nil
    }

    /// Why a type cannot be stored, or nil when it can (a known attribute type, or any other
    /// named type: raw-value enums and `Codable` values, which the compiler then checks).
    static func unsupportedReason(_ type: TypeSyntax) -> String? {
        if let tuple = type.as(TupleTypeSyntax.self), tuple.elements.count == 1, let only = tuple.elements.first,
            only.firstName == nil
        {
            return unsupportedReason(only.type)  // parentheses
        }
        if type.is(TupleTypeSyntax.self) { return "tuples are not stored; declare a Codable struct (stored as JSON)" }
        if type.is(FunctionTypeSyntax.self) || type.is(AttributedTypeSyntax.self) {
            return "functions are not stored; mark it @Transient"
        }
        if type.is(SomeOrAnyTypeSyntax.self) || type.is(CompositionTypeSyntax.self) {
            return "an existential or opaque type has no one attribute type; declare a concrete type, or mark it @Transient"
        }
        if type.is(MetatypeTypeSyntax.self) { return "metatypes are not stored; mark it @Transient" }
        if let identifier = type.as(IdentifierTypeSyntax.self) {
            let name = identifier.name.text
            if let reason = KnownType.unsupported[name] { return reason }
            if let arguments = identifier.genericArgumentClause?.arguments {
                for argument in arguments {
                    if let type = argument.argument.as(TypeSyntax.self), let reason = unsupportedReason(type) { return reason }
                }
            }
        }
        if let array = type.as(ArrayTypeSyntax.self) { return unsupportedReason(array.element) }
        if let dictionary = type.as(DictionaryTypeSyntax.self) {
            return unsupportedReason(dictionary.key) ?? unsupportedReason(dictionary.value)
        }
        return nil
    }

    /// The type of a property declared without one, from its initial value: literals, `T(…)` and
    /// `T.member` / `T.member(…)` (a static factory).
    static func inferredType(of expression: ExprSyntax) -> String? {
        if expression.is(StringLiteralExprSyntax.self) { return "String" }
        if KnownType.isInteger(expression) { return "Int" }
        if KnownType.isFloat(expression) { return "Double" }
        if expression.is(BooleanLiteralExprSyntax.self) { return "Bool" }
        if let call = expression.as(FunctionCallExprSyntax.self) {
            if let reference = call.calledExpression.as(DeclReferenceExprSyntax.self), isTypeName(reference.baseName.text) {
                return reference.baseName.text
            }
            if let member = call.calledExpression.as(MemberAccessExprSyntax.self),
                let base = member.base?.as(DeclReferenceExprSyntax.self), isTypeName(base.baseName.text)
            {
                return base.baseName.text
            }
        }
        if let member = expression.as(MemberAccessExprSyntax.self), let base = member.base?.as(DeclReferenceExprSyntax.self),
            isTypeName(base.baseName.text)
        {
            return base.baseName.text
        }
        return nil
    }

    private static func isTypeName(_ name: String) -> Bool {
        name.first.map { $0.isUppercase } ?? false
    }

    /// Whether an accessor block makes a computed property (a getter), not observers on a stored one.
    static func isComputed(_ block: AccessorBlockSyntax) -> Bool {
        switch block.accessors {
        case .getter: return true
        case .accessors(let accessors):
            return accessors.contains { [.keyword(.get), .keyword(._read), .keyword(.unsafeAddress)].contains($0.accessorSpecifier.tokenKind) }
        }
    }
}

/// The CloudStore attributes on one property declaration.
struct PropertyAttributes {
    var attribute: AttributeSyntax?
    var relationship: AttributeSyntax?
    var transient: AttributeSyntax?

    init(_ list: AttributeListSyntax) {
        for element in list {
            guard let attribute = element.as(AttributeSyntax.self) else { continue }
            switch attribute.attributeName.trimmedDescription {
            case "Attribute", "CloudStore.Attribute": self.attribute = attribute
            case "Relationship", "CloudStore.Relationship": relationship = attribute
            case "Transient", "CloudStore.Transient": transient = attribute
            default: break
            }
        }
    }

    /// The attributes present, with the macro's name.
    var markers: [(AttributeSyntax, String)] {
        [(attribute, "Attribute"), (relationship, "Relationship"), (transient, "Transient")].compactMap { node, name in
            node.map { ($0, name) }
        }
    }
}
