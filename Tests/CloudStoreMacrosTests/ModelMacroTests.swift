import CloudStoreMacros
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import SwiftSyntaxMacrosGenericTestSupport
import Testing

/// `@Model`'s expansion, and each problem it reports at compile time with its fix-it.
@Suite("@Model expands to the entity, its table and its row code, and reports what cannot be stored")
struct ModelMacroTests {
    static let macros: [String: MacroSpec] = [
        "Model": MacroSpec(type: ModelMacro.self, conformances: ["PersistentModel"]),
        "Attribute": MacroSpec(type: PropertyMarkerMacro.self),
        "Relationship": MacroSpec(type: PropertyMarkerMacro.self),
        "Transient": MacroSpec(type: PropertyMarkerMacro.self),
    ]

    func expand(
        _ source: String, _ expanded: String, diagnostics: [DiagnosticSpec] = [], applyFixIts: [String]? = nil,
        fixed: String? = nil, sourceLocation: Testing.SourceLocation = #_sourceLocation
    ) {
        assertMacroExpansion(
            source, expandedSource: expanded, diagnostics: diagnostics, macroSpecs: Self.macros,
            applyFixIts: applyFixIts, fixedSource: fixed,
            failureHandler: { Issue.record(Comment(rawValue: $0.message), sourceLocation: sourceLocation) })
    }

    @Test func aModel_expandsToItsEntityTableAndRowCode() {
        expand(
            """
            @Model(indexes: [["pinned", "created"]])
            public struct Note {
                public var id = UUID.timeOrdered()
                @Attribute(.preserveAfterDeletion) var title = ""
                var body: String?
                var pinned = false
                var created: Date?
                @Attribute(originalName: "rank") var priority: Int64 = -1
                var mood: Mood = .calm
                var folder: Folder.ID?
                @Relationship(deleteRule: .cascade, inverse: \\Tag.notes) var tags: [Tag.ID] = []
                @Transient var isSelected = false
                var summary: String { title }
            }
            """,
            """
            public struct Note {
                public var id = UUID.timeOrdered()
                var title = ""
                var body: String?
                var pinned = false
                var created: Date?
                var priority: Int64 = -1
                var mood: Mood = .calm
                var folder: Folder.ID?
                var tags: [Tag.ID] = []
                var isSelected = false
                var summary: String { title }

                enum CodingKeys: String, CodingKey {
                    case id, title, body, pinned, created, priority, mood, folder, tags
                }
            }

            extension Note: CloudStore.PersistentModel {
                public typealias ID = Foundation.UUID

                /// The entity `@Model` derives from this type's stored properties.
                public static var entityDescription: CloudStore.EntityDescription {
                    CloudStore.EntityDescription(
                        Self.entityName,
                        attributes: [
                            CloudStore.AttributeDescription("title", CloudStore.AttributeType.of(String.self), optional: false, default: CloudStore.AttributeValue.of("" as String), renamedFrom: nil, preservesValueAfterDeletion: true, externalStorage: false, encrypted: false),
                            CloudStore.AttributeDescription("body", CloudStore.AttributeType.of(String.self), optional: true, default: nil, renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                            CloudStore.AttributeDescription("pinned", CloudStore.AttributeType.of(Bool.self), optional: false, default: CloudStore.AttributeValue.of(false as Bool), renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                            CloudStore.AttributeDescription("created", CloudStore.AttributeType.of(Date.self), optional: true, default: nil, renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                            CloudStore.AttributeDescription("priority", CloudStore.AttributeType.of(Int64.self), optional: false, default: CloudStore.AttributeValue.of(-1 as Int64), renamedFrom: "rank", preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                            CloudStore.AttributeDescription("mood", CloudStore.AttributeType.of(Mood.self), optional: false, default: CloudStore.AttributeValue.of(.calm as Mood), renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                        ],
                        relationships: [
                            CloudStore.RelationshipDescription("folder", destination: Folder.entityName, toMany: false, inverse: nil, deleteRule: .nullify, renamedFrom: nil),
                            CloudStore.RelationshipDescription("tags", destination: Tag.entityName, toMany: true, inverse: "notes", deleteRule: .cascade, renamedFrom: nil),
                        ],
                        indexes: [["pinned", "created"]],
                        uniquenessConstraints: [],
                        isMirrored: true,
                        renamedFrom: nil)
                }

                public static var _modelProperties: [CloudStore.ModelProperty<Note>] {
                    [
                        CloudStore.ModelProperty("id", \\Note.id),
                        CloudStore.ModelProperty("title", \\Note.title),
                        CloudStore.ModelProperty("body", \\Note.body),
                        CloudStore.ModelProperty("pinned", \\Note.pinned),
                        CloudStore.ModelProperty("created", \\Note.created),
                        CloudStore.ModelProperty("priority", \\Note.priority),
                        CloudStore.ModelProperty("mood", \\Note.mood),
                        CloudStore.ModelProperty("folder", \\Note.folder),
                        CloudStore.ModelProperty("tags", \\Note.tags),
                    ]
                }

                public init(_modelRow row: CloudStore.ModelRowReader) throws {
                    self.id = row.id
                    self.title = try row.read(String.self, at: 1)
                    self.body = try row.read(String?.self, at: 2)
                    self.pinned = try row.read(Bool.self, at: 3)
                    self.created = try row.read(Date?.self, at: 4)
                    self.priority = try row.read(Int64.self, at: 5)
                    self.mood = try row.read(Mood.self, at: 6)
                    self.folder = try row.read(Folder.ID?.self, at: 7)
                    self.tags = try row.readToMany(at: 8)
                }

                public func _writeModel(to row: inout CloudStore.ModelRowWriter) throws {
                    try row.write(self.title, at: 1)
                    try row.write(self.body, at: 2)
                    try row.write(self.pinned, at: 3)
                    try row.write(self.created, at: 4)
                    try row.write(self.priority, at: 5)
                    try row.write(self.mood, at: 6)
                    try row.write(self.folder, at: 7)
                    row.writeToMany(self.tags, at: 8)
                }
            }
            """)
    }

    @Test func entityOptions_andAnInternalType() {
        expand(
            """
            @Model(name: "Memo", originalName: "Jotting", mirrored: false, uniquenessConstraints: [["code"]], duplicateKeyRule: .refuse)
            struct Item {
                let id: UUID
                @Attribute(.unique, .indexed) var code: String
                @Attribute(.externalStorage) var photo: Data?
                var labels: [String] = []
            }
            """,
            """
            struct Item {
                let id: UUID
                var code: String
                var photo: Data?
                var labels: [String] = []
            }

            extension Item: CloudStore.PersistentModel {
                typealias ID = Foundation.UUID

                static var entityName: String {
                    "Memo"
                }

                /// The entity `@Model` derives from this type's stored properties.
                static var entityDescription: CloudStore.EntityDescription {
                    CloudStore.EntityDescription(
                        Self.entityName,
                        attributes: [
                            CloudStore.AttributeDescription("code", CloudStore.AttributeType.of(String.self), optional: false, default: nil, renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                            CloudStore.AttributeDescription("photo", CloudStore.AttributeType.of(Data.self), optional: true, default: nil, renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: true, encrypted: false),
                            CloudStore.AttributeDescription("labels", CloudStore.AttributeType.of([String].self), optional: false, default: CloudStore.AttributeValue.of([] as [String]), renamedFrom: nil, preservesValueAfterDeletion: false, externalStorage: false, encrypted: false),
                        ],
                        relationships: [],
                        indexes: [["code"]],
                        uniquenessConstraints: [["code"]],
                        isMirrored: false,
                        renamedFrom: "Jotting",
                        duplicateKeyRule: .refuse)
                }

                static var _modelProperties: [CloudStore.ModelProperty<Item>] {
                    [
                        CloudStore.ModelProperty("id", \\Item.id),
                        CloudStore.ModelProperty("code", \\Item.code),
                        CloudStore.ModelProperty("photo", \\Item.photo),
                        CloudStore.ModelProperty("labels", \\Item.labels),
                    ]
                }

                init(_modelRow row: CloudStore.ModelRowReader) throws {
                    self.id = row.id
                    self.code = try row.read(String.self, at: 1)
                    self.photo = try row.read(Data?.self, at: 2)
                    self.labels = try row.read([String].self, at: 3)
                }

                func _writeModel(to row: inout CloudStore.ModelRowWriter) throws {
                    try row.write(self.code, at: 1)
                    try row.write(self.photo, at: 2)
                    try row.write(self.labels, at: 3)
                }
            }
            """)
    }

    // MARK: Diagnostics

    @Test func missingID_isAddedByTheFixIt() {
        expand(
            """
            @Model
            struct Note {
                var title = ""
            }
            """,
            """
            struct Note {
                var title = ""
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "Note has no id: every object needs a UUID id, its record name in the cloud; declare `var id = UUID.timeOrdered()`",
                    line: 2, column: 8, fixIts: [FixItSpec(message: "add `var id = UUID.timeOrdered()`")])
            ],
            applyFixIts: ["add `var id = UUID.timeOrdered()`"],
            fixed: """
                @Model
                struct Note {
                    var id = UUID.timeOrdered()
                    var title = ""
                }
                """)
    }

    @Test func mirroredAttributeWithoutDefault_offersOptionalOrADefault() {
        let source = """
            @Model
            struct Note {
                var id = UUID()
                var title: String
            }
            """
        let diagnostic = DiagnosticSpec(
            message: "title needs a literal default or an optional type: a mirrored entity may receive records without it (from another device or an older version of the app); declare it as String? or give it a literal default, or mark the entity @Model(mirrored: false)",
            line: 4, column: 9,
            fixIts: [FixItSpec(message: "declare it as String?"), FixItSpec(message: "give it the default \"\"")])
        let expanded = """
            struct Note {
                var id = UUID()
                var title: String
            }
            """
        expand(
            source, expanded, diagnostics: [diagnostic], applyFixIts: ["declare it as String?"],
            fixed: """
                @Model
                struct Note {
                    var id = UUID()
                    var title: String?
                }
                """)
        expand(
            source, expanded, diagnostics: [diagnostic], applyFixIts: ["give it the default \"\""],
            fixed: """
                @Model
                struct Note {
                    var id = UUID()
                    var title: String = ""
                }
                """)
    }

    @Test func nonLiteralInitialValue_isNoDefault_andTheFixItKeepsIt() {
        expand(
            """
            @Model
            struct Note {
                var id = UUID()
                var created = Date()
            }
            """,
            """
            struct Note {
                var id = UUID()
                var created = Date()
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "created needs a literal default or an optional type: a mirrored entity may receive records without it (from another device or an older version of the app); declare it as Date? or give it a literal default, or mark the entity @Model(mirrored: false)",
                    line: 4, column: 9, fixIts: [FixItSpec(message: "declare it as Date?")])
            ],
            applyFixIts: ["declare it as Date?"],
            fixed: """
                @Model
                struct Note {
                    var id = UUID()
                    var created: Date? = Date()
                }
                """)
    }

    @Test func unsupportedTypes_areNamed() {
        expand(
            """
            @Model
            struct Note {
                var id = UUID()
                var count: UInt64 = 0
                var pair: (Int, Int)?
                var action: (() -> Void)?
                var any: Any?
                var nested: String??
            }
            """,
            """
            struct Note {
                var id = UUID()
                var count: UInt64 = 0
                var pair: (Int, Int)?
                var action: (() -> Void)?
                var any: Any?
                var nested: String??
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "count cannot be stored: an int64 attribute cannot hold every UInt64; declare it as Int64",
                    line: 4, column: 16),
                DiagnosticSpec(
                    message: "pair cannot be stored: tuples are not stored; declare a Codable struct (stored as JSON)",
                    line: 5, column: 15),
                DiagnosticSpec(message: "action cannot be stored: functions are not stored; mark it @Transient", line: 6, column: 17),
                DiagnosticSpec(
                    message: "any cannot be stored: a stored property has one concrete type; use a Codable type (stored as JSON) or mark it @Transient",
                    line: 7, column: 14),
                DiagnosticSpec(message: "nested: a nested optional cannot be stored; declare one `?`", line: 8, column: 17),
            ])
    }

    @Test func relationships_mustBeOptionalToOneOrNonOptionalToMany() {
        expand(
            """
            @Model
            struct Note {
                var id = UUID()
                var folder: Folder.ID
                var tags: [Tag.ID]?
                var labels: Set<Tag.ID> = []
                @Relationship(inverse: \\Folder.notes) var other: [Tag.ID] = []
                @Relationship var title = ""
            }
            """,
            """
            struct Note {
                var id = UUID()
                var folder: Folder.ID
                var tags: [Tag.ID]?
                var labels: Set<Tag.ID> = []
                var other: [Tag.ID] = []
                var title = ""
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "folder is a to-one relationship, which may always be nil (its object deleted, or not fetched yet); declare it as Folder.ID?",
                    line: 4, column: 17, fixIts: [FixItSpec(message: "declare it as Folder.ID?")]),
                DiagnosticSpec(
                    message: "tags is a to-many relationship, which is never nil (empty when it relates nothing); declare it as [Tag.ID] = []",
                    line: 5, column: 15, fixIts: [FixItSpec(message: "declare it as [Tag.ID]")]),
                DiagnosticSpec(message: "labels: a to-many relationship is declared as an array, [Tag.ID]", line: 6, column: 17),
                DiagnosticSpec(
                    message: "@Relationship(inverse:) names a property of Folder, but it must name one of Tag", line: 7, column: 28),
                DiagnosticSpec(
                    message: "title is an attribute (String); a relationship is declared as Destination.ID? (to-one) or [Destination.ID] (to-many)",
                    line: 8, column: 5),
            ],
            applyFixIts: ["declare it as Folder.ID?", "declare it as [Tag.ID]"],
            fixed: """
                @Model
                struct Note {
                    var id = UUID()
                    var folder: Folder.ID?
                    var tags: [Tag.ID]
                    var labels: Set<Tag.ID> = []
                    @Relationship(inverse: \\Folder.notes) var other: [Tag.ID] = []
                    @Relationship var title = ""
                }
                """)
    }

    @Test func optionsThatCannotHold_areNamed() {
        expand(
            """
            @Model(indexes: [["body"]])
            struct Note {
                let id = UUID()
                @Attribute(.externalStorage) var title = ""
                @Attribute(.unique) var code = ""
                @Relationship(deleteRule: .deny) var tags: [Tag.ID] = []
                @Attribute var summary: String { "" }
                @Transient var cache: [String: Int]
                lazy var size = 0
            }
            """,
            """
            struct Note {
                let id = UUID()
                var title = ""
                var code = ""
                var tags: [Tag.ID] = []
                var summary: String { "" }
                var cache: [String: Int]
                lazy var size = 0
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "a `let` with an initial value cannot take the value read from the store; declare it with `var`",
                    line: 3, column: 5, fixIts: [FixItSpec(message: "use `var`")]),
                DiagnosticSpec(
                    message: "title: external storage keeps the bytes of a Data attribute in a file; String is not Data",
                    line: 4, column: 16),
                DiagnosticSpec(
                    message: "tags: the deny delete rule cannot hold in a mirrored entity (another device may delete the object anyway); use .nullify or .cascade",
                    line: 6, column: 31),
                DiagnosticSpec(
                    message: "summary is a computed property, which the store does not keep; remove @Attribute, or make it a stored property",
                    line: 7, column: 5, fixIts: [FixItSpec(message: "remove @Attribute")]),
                DiagnosticSpec(
                    message: "a @Transient property needs an initial value: it is not stored, so an object read from the store has this value",
                    line: 8, column: 5),
                DiagnosticSpec(message: "a lazy property cannot be stored; mark it @Transient", line: 9, column: 5),
                DiagnosticSpec(
                    message: "Note.body is not a stored attribute or to-one relationship, so it cannot be indexed", line: 1,
                    column: 19),
            ])
    }

    @Test func untypedProperty_andNotAStruct() {
        expand(
            """
            @Model
            struct Note {
                var id = UUID()
                var tags = makeTags()
            }
            @Model
            class Folder {}
            """,
            """
            struct Note {
                var id = UUID()
                var tags = makeTags()
            }
            class Folder {}
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "declare the type of tags (`var tags: Type = …`): @Model reads it to choose the attribute type",
                    line: 4, column: 9),
                DiagnosticSpec(
                    message: "@Model applies to a struct: CloudStore's objects are values, read from and written to the store",
                    line: 6, column: 1),
            ])
    }

    @Test func aGenericType_aWrongID_andMisplacedOptions() {
        expand(
            """
            @Model(name: title)
            struct Box<Content> {
                var id: Int
                @Attribute(.indexed) var folder: Folder.ID?
                @Relationship(inverse: \\Folder.notes.first) var owner: Folder.ID?
            }
            """,
            """
            struct Box<Content> {
                var id: Int
                var folder: Folder.ID?
                var owner: Folder.ID?
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "a @Model type cannot be generic: its entity has one set of attribute types", line: 2, column: 11),
                DiagnosticSpec(message: "@Model(name:) takes a string literal", line: 1, column: 14),
                DiagnosticSpec(
                    message: "the id must be a UUID (the object's record name); declare `var id = UUID.timeOrdered()`",
                    line: 3, column: 13),
                DiagnosticSpec(
                    message: "folder is a relationship; its options go in @Relationship(deleteRule:inverse:originalName:)",
                    line: 4, column: 5, fixIts: [FixItSpec(message: "remove @Attribute")]),
                DiagnosticSpec(
                    message: "@Relationship(inverse:) takes a key path to one stored property, as \\Folder.property",
                    line: 5, column: 28),
            ])
    }

    @Test func aMarkerOutsideAModel_warnsThatItDoesNothing() {
        expand(
            """
            struct Plain {
                @Attribute(.indexed) var title = ""
            }
            """,
            """
            struct Plain {
                var title = ""
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Attribute has an effect only on a stored property of a @Model struct", line: 2, column: 5,
                    severity: .warning)
            ])
    }
}
