import Foundation
import GRDB

/// The entities a container mirrors in the server's **public database** instead of the user's
/// private one (``PersistentCloudContainer/Options/publicEntities``): everyone's objects of them are
/// read into the store, and this user's own are uploaded there.
///
/// A public object and a private one never relate: a reference from one database into the other
/// would point at a record the other side's readers cannot fetch. So each relationship of a public
/// entity goes to a public entity, and no other entity has a relationship to one.
struct PublicEntities: Sendable, Hashable {
    /// The entity names, which are also the record types of the public database.
    let names: Set<String>

    static let none = PublicEntities(checked: [])

    private init(checked names: Set<String>) {
        self.names = names
    }

    /// The entities a container checked and stored in the file (``MirrorStateKey/publicEntities``),
    /// for the recorder of another process's plain store.
    static func stored(in db: Database) throws -> PublicEntities {
        PublicEntities(checked: Set(try Ledger(db).state(.publicEntities, as: [String].self) ?? []))
    }

    /// Checks `names` against `schema`.
    ///
    /// - Throws: ``ContainerError/Code/invalidOptions`` naming the entity or relationship at fault
    ///   and what to do.
    init(_ names: Set<String>, in schema: Schema) throws {
        for name in names.sorted() {
            guard let entity = schema.entity(named: name) else {
                throw ContainerError.invalidOptions(
                    "publicEntities names \(name), which the schema \(schema.name) does not have: name entities of the schema (\(schema.entities.map(\.name).joined(separator: ", ")))")
            }
            guard entity.isMirrored else {
                throw ContainerError.invalidOptions(
                    "publicEntities names \(name), which the schema keeps local only (not mirrored): mirror it, or leave it out of publicEntities")
            }
            if let encrypted = entity.attributes.first(where: \.isEncrypted) {
                throw ContainerError.invalidOptions(
                    "publicEntities names \(name), whose attribute \(encrypted.name) is encrypted: every user reads the public database, and no key is shared with all of them. Remove \"encrypted\", or leave \(name) out of publicEntities")
            }
        }
        for entity in schema.mirroredEntities {
            for relationship in entity.relationships where names.contains(entity.name) != names.contains(relationship.destination) {
                let (publicSide, privateSide) =
                    names.contains(entity.name) ? (entity.name, relationship.destination) : (relationship.destination, entity.name)
                throw ContainerError.invalidOptions(
                    "\(entity.name).\(relationship.name) relates \(publicSide), mirrored in the public database, to \(privateSide), mirrored in the private one: a record of one database cannot point into the other. Put both entities in publicEntities, or neither")
            }
        }
        self.names = names
    }

    var isEmpty: Bool { names.isEmpty }

    func contains(_ entityName: String) -> Bool { names.contains(entityName) }

    /// The zone a new object of `entityName` starts in.
    func initialZone(of entityName: String) -> MirrorZone.Key {
        names.contains(entityName) ? .publicDatabase : .primary
    }
}

extension Database {
    /// Who created a record of the public database that another device fetched: one row of
    /// `cloudstore_mirror_public_creator`, written by the import that fetched it. Nil for records
    /// this device created and has not fetched back (its own).
    /// Asked only of a record of the public zone, whose store a container with public entities
    /// opened, which made the table.
    func publicCreator(of recordName: String) throws -> String? {
        try String.fetchOne(
            cachedStatement(sql: "SELECT creator FROM cloudstore_mirror_public_creator WHERE record_name = ?"),
            arguments: [recordName])
    }

    func setPublicCreator(_ creator: String, of recordName: String) throws {
        try cachedStatement(sql: "INSERT OR REPLACE INTO cloudstore_mirror_public_creator (record_name, creator) VALUES (?, ?)")
            .execute(arguments: [recordName, creator])
    }
}
