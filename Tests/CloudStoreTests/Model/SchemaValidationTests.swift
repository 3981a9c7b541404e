import CloudStore
import Testing

@Suite("Schema validation: one rule, one exact message")
struct SchemaValidationTests {
    /// A valid two-entity schema each test breaks in one way.
    static func base() -> Schema {
        Schema(name: "Notes", version: 1, entities: [
            EntityDescription(
                "Folder", attributes: [AttributeDescription("title", .string, default: .string(""))],
                relationships: [.toMany("notes", to: "Note", inverse: "folder", deleteRule: .cascade)]),
            EntityDescription(
                "Note",
                attributes: [
                    AttributeDescription("title", .string, default: .string("")),
                    AttributeDescription("body", .string, optional: true),
                ],
                relationships: [.toOne("folder", to: "Folder", inverse: "notes")]),
        ])
    }

    static func problems(_ change: (inout Schema) -> Void) -> [String] {
        var schema = base()
        change(&schema)
        return schema.problems().map(\.description)
    }

    @Test func theBaseIsValid() throws {
        try Self.base().validate()
        try Schema.notes().validate()
    }

    @Test func schemaName() {
        #expect(Self.problems { $0.name = "My Notes" } == [
            #"schema name "My Notes" is not a valid identifier (letters, digits and _, not starting with a digit, at most 255 characters)"#
        ])
    }

    @Test func version() {
        #expect(Self.problems { $0.version = 0 } == ["version 0 must be 1 or more"])
    }

    @Test func noEntities() {
        #expect(Self.problems { $0.entities = [] } == ["the schema has no entities"])
    }

    @Test func entityNameNotAnIdentifier() {
        #expect(Self.problems { $0.entities.append(EntityDescription("2Notes")) } == [
            #"2Notes: "2Notes" is not a valid entity name (letters, digits and _, not starting with a digit, at most 255 characters)"#
        ])
    }

    @Test func reservedEntityNames() {
        #expect(Self.problems { $0.entities.append(EntityDescription("cloudstore_meta")) } == [
            #"cloudstore_meta: the entity name is reserved: names starting with "cloudstore" belong to CloudStore's own tables"#
        ])
        #expect(Self.problems { $0.entities.append(EntityDescription("sqlite_stat")) } == [
            #"sqlite_stat: the entity name is reserved: names starting with "sqlite_" belong to SQLite"#
        ])
        #expect(Self.problems { $0.entities.append(EntityDescription("_Thing")) } == [
            #"_Thing: the entity name is reserved: names starting with "_" belong to CloudKit"#
        ])
        #expect(Self.problems { $0.entities.append(EntityDescription("Users")) } == [
            #"Users: the entity name is reserved: "Users" is CloudKit's record type for user records"#
        ])
    }

    @Test func duplicateEntities() {
        #expect(Self.problems { $0.entities.append(EntityDescription("Note", attributes: [])) } == [
            "Note: the entity is declared twice"
        ])
        #expect(Self.problems { $0.entities.append(EntityDescription("NOTE")) } == [
            "NOTE: differs from entity Note only in case (SQLite table names ignore case)"
        ])
    }

    @Test func duplicateProperties() {
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("folder", .string, optional: true)) } == [
            "Note.folder: declared twice"
        ])
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("Body", .string, optional: true)) } == [
            "Note.Body: differs from body only in case (SQLite column names ignore case)"
        ])
    }

    @Test func propertyNames() {
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("due date", .date, optional: true)) } == [
            #"Note.due date: "due date" is not a valid property name (letters, digits and _, not starting with a digit, at most 255 characters)"#
        ])
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("id", .uuid, optional: true)) } == [
            #"Note.id: "id" is reserved: every object has an implicit UUID id, its record name"#
        ])
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("recordName", .string, optional: true)) } == [
            #"Note.recordName: "recordName" is reserved: CloudKit uses it for a system field"#
        ])
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("cloudstoreFlag", .bool, optional: true)) } == [
            #"Note.cloudstoreFlag: the name is reserved: names starting with "cloudstore" belong to CloudStore's own tables"#
        ])
    }

    @Test func mirroredAttributesNeedOptionalOrDefault() {
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("words", .int64)) } == [
            "Note.words: a mirrored attribute must be optional or have a default (a record from another device may not carry it)"
        ])
        #expect(Self.problems {
            $0.entities[1].attributes.append(AttributeDescription("words", .int64))
            $0.entities[1].isMirrored = false
            $0.entities[0].isMirrored = false
        } == [])
    }

    @Test func defaults() {
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("words", .int64, default: .null)) } == [
            "Note.words: the default is null but the attribute is not optional",
            "Note.words: a mirrored attribute must be optional or have a default (a record from another device may not carry it)",
        ])
        #expect(Self.problems { $0.entities[1].attributes.append(AttributeDescription("words", .int64, default: .string("x"))) } == [
            "Note.words: the default is a string but the attribute is an int64"
        ])
    }

    @Test func unknownDestination() {
        #expect(Self.problems { $0.entities[1].relationships.append(.toOne("owner", to: "Person", inverse: "notes")) } == [
            #"Note.owner: destination "Person" is not an entity of the schema"#
        ])
    }

    @Test func inverseRequired() {
        #expect(Self.problems {
            $0.entities[1].relationships.append(.toOne("archive", to: "Folder", inverse: nil))
        } == ["Note.archive: a mirrored relationship needs an inverse"])
    }

    @Test func inverseMustExist() {
        #expect(Self.problems { $0.entities[1].relationships[0].inverse = "notez" } == [
            #"Note.folder: inverse "notez" is not a relationship of Folder"#
        ])
    }

    @Test func inverseMustPointBack() {
        #expect(Self.problems {
            $0.entities[1].relationships.append(.toOne("archive", to: "Folder", inverse: "notes"))
        } == ["Note.archive: inverse Folder.notes points back to Note.folder, not to Note.archive"])
    }

    @Test func denyIsNotAllowedWhenMirrored() {
        #expect(Self.problems { $0.entities[0].relationships[0].deleteRule = .deny } == [
            "Folder.notes: the deny delete rule is not allowed in a mirrored schema (another device could not honour it); use nullify or cascade"
        ])
    }

    @Test func uniquenessConstraintsOfMirroredEntitiesAreValuesTheServerCompares() {
        #expect(Self.problems { $0.entities[1].uniquenessConstraints = [["title"], ["title", "folder"]] } == [])
        #expect(Self.problems {
            $0.entities[1].attributes.append(AttributeDescription("scan", .data, optional: true, externalStorage: true))
            $0.entities[1].uniquenessConstraints = [["scan"]]
        } == [
            "Note.scan: an attribute with external storage cannot be in a uniqueness constraint of a mirrored entity (the server stores its bytes as an asset, not a value it compares); remove it from the constraint or store it inline"
        ])
    }

    @Test func encryptedAttributes_nameWhatCannotWork() {
        #expect(Self.problems { $0.entities[1].attributes[1].isEncrypted = true } == [])
        #expect(Self.problems {
            $0.entities[1].attributes[1].isEncrypted = true
            $0.entities[1].uniquenessConstraints = [["body"]]
        } == [
            #"Note.body: an encrypted attribute cannot be in a uniqueness constraint of a mirrored entity (the server sees only ciphertext, which differs for equal values); remove it from the constraint or remove "encrypted""#
        ])
        #expect(Self.problems {
            $0.entities[1].attributes.append(AttributeDescription("scan", .data, optional: true, externalStorage: true, encrypted: true))
        } == [])
        // Its bytes travel as an asset sealed before upload; the field stays an asset.
        #expect(AttributeDescription("scan", .data, optional: true, externalStorage: true, encrypted: true).fieldType == .asset)
        #expect(Self.problems {
            $0.entities[1].isMirrored = false
            $0.entities[0].isMirrored = false
            $0.entities[1].attributes[1].isEncrypted = true
        } == [
            #"Note.body: "encrypted" protects a value on the server, and this entity is not mirrored; remove "encrypted" (the device's own file is not encrypted)"#
        ])
    }

    @Test func indexesNameAttributesOrToOneRelationships() {
        #expect(Self.problems { $0.entities[1].indexes = [["title", "craeted"]] } == [
            #"Note: index [title, craeted] names "craeted", which is not an attribute or to-one relationship"#
        ])
        #expect(Self.problems { $0.entities[0].indexes = [["notes"]] } == [
            #"Folder: index [notes] names "notes", which is not an attribute or to-one relationship"#
        ])
        #expect(Self.problems { $0.entities[1].indexes = [[]] } == ["Note: an index must name at least one property"])
        #expect(Self.problems { $0.entities[1].indexes = [["folder", "title"]] } == [])
    }

    @Test func mirroredEntitiesRelateOnlyToMirroredEntities() {
        #expect(Self.problems { $0.entities[0].isMirrored = false } == [
            "Note.folder: a mirrored entity cannot relate to Folder, which is not mirrored"
        ])
    }

    @Test func renames() {
        #expect(Self.problems { $0.entities[1].attributes[0].renamedFrom = "title" } == [
            "Note.title: renamedFrom must name the previous name, not the current one"
        ])
        #expect(Self.problems { $0.entities[1].renamedFrom = "Folder" } == [
            #"Note: renamedFrom "Folder" is still the name of another entity"#
        ])
    }

    @Test func everyProblemIsReportedTogether() {
        let error = #expect(throws: SchemaError.self) {
            var schema = Self.base()
            schema.version = 0
            schema.entities[1].relationships[0].inverse = nil
            schema.entities[0].relationships[0].deleteRule = .deny
            try schema.validate()
        }
        #expect(error?.problems.map(\.description) == [
            "version 0 must be 1 or more",
            "Folder.notes: the deny delete rule is not allowed in a mirrored schema (another device could not honour it); use nullify or cascade",
            "Note.folder: a mirrored relationship needs an inverse",
        ])
    }
}
