import CloudStore
import Foundation
import Testing

/// One-to-one and self-referential relationships, which the Notes schema does not have.
@Suite struct StoreRelationshipTests {
    static let schema = Schema(name: "People", version: 1, entities: [
        EntityDescription(
            "Person", attributes: [AttributeDescription("name", .string, default: .string(""))],
            relationships: [
                .toOne("passport", to: "Passport", inverse: "owner", deleteRule: .cascade),
                .toOne("spouse", to: "Person", inverse: "spouse"),
                .toMany("friends", to: "Person", inverse: "friends"),
            ]),
        EntityDescription(
            "Passport", attributes: [AttributeDescription("number", .string, default: .string(""))],
            relationships: [.toOne("owner", to: "Person", inverse: "passport")]),
    ])

    struct Person: Entity, Equatable {
        var id = UUID()
        var name = ""
        var passport: UUID?
        var spouse: UUID?
        var friends: [UUID] = []
    }

    struct Passport: Entity, Equatable {
        var id = UUID()
        var number = ""
        var owner: UUID?
    }

    func fetch(_ store: PersistentStore, _ id: UUID) throws -> Person? {
        try store.read { try $0.fetch(Person.self, id: id) }
    }

    @Test func oneToOne_keepsBothSidesConsistent() throws {
        let fixture = try StoreFixture(schema: Self.schema)
        let store = fixture.store
        var ana = Person(name: "Ana")
        var ben = Person(name: "Ben")
        let passport = Passport(number: "X1")
        try store.write { context in
            try context.insert(passport)
            try context.insert(ben)
            ana.passport = passport.id
            try context.insert(ana)
        }
        #expect(try store.read { try $0.fetch(Passport.self, id: passport.id)?.owner } == ana.id)

        // Giving the passport to Ben takes it from Ana.
        ben.passport = passport.id
        try store.write { try $0.update(ben) }
        #expect(try fetch(store, ana.id)?.passport == nil)
        #expect(try store.read { try $0.fetch(Passport.self, id: passport.id)?.owner } == ben.id)
        let moved = try #require(try store.history(after: nil).last)
        #expect(Set(moved.changes.map(\.objectID)) == [ben.id, ana.id, passport.id])

        // A one-to-one relationship to the same entity, set from one side.
        ana = try #require(try fetch(store, ana.id))
        ana.spouse = ben.id
        try store.write { try $0.update(ana) }
        #expect(try fetch(store, ben.id)?.spouse == ana.id)
        let cleo = Person(name: "Cleo", spouse: ben.id)
        try store.write { try $0.insert(cleo) }
        #expect(try fetch(store, ana.id)?.spouse == nil)
        #expect(try fetch(store, ben.id)?.spouse == cleo.id)

        // Person.passport cascades: deleting Ben deletes his passport and clears Cleo's spouse.
        try store.write { try $0.delete(Person.self, id: ben.id) }
        #expect(try store.read { try $0.count(Passport.self) } == 0)
        #expect(try fetch(store, cleo.id)?.spouse == nil)
    }

    @Test func symmetricManyToMany_isSeenFromBothObjects() throws {
        let fixture = try StoreFixture(schema: Self.schema)
        let store = fixture.store
        let ana = Person(name: "Ana")
        let ben = Person(name: "Ben")
        var cleo = Person(name: "Cleo")
        try store.write { context in
            try context.insert(ana)
            try context.insert(ben)
            cleo.friends = [ana.id, ben.id]
            try context.insert(cleo)
        }
        #expect(try fetch(store, ana.id)?.friends == [cleo.id])
        #expect(try fetch(store, ben.id)?.friends == [cleo.id])
        #expect(Set(try fetch(store, cleo.id)?.friends ?? []) == [ana.id, ben.id])

        try store.write { try $0.removeRelated(entityName: "Person", id: ana.id, relationship: "friends", cleo.id) }
        #expect(try fetch(store, cleo.id)?.friends == [ben.id])
        try store.write { try $0.delete(Person.self, id: ben.id) }
        #expect(try fetch(store, cleo.id)?.friends == [])
    }

    @Test func relationshipsWithoutInverse_areClearedWhenTheirTargetIsDeleted() throws {
        let schema = Schema(name: "Local", version: 1, entities: [
            EntityDescription("Item", attributes: [AttributeDescription("name", .string, optional: true)], isMirrored: false),
            EntityDescription(
                "Bookmark", attributes: [],
                relationships: [
                    .toOne("item", to: "Item", inverse: nil), .toMany("items", to: "Item", inverse: nil),
                ],
                isMirrored: false),
        ])
        let fixture = try StoreFixture(schema: schema)
        let item = UUID()
        let bookmark = UUID()
        try fixture.store.write { context in
            try context.insert(EntitySnapshot(entityName: "Item", id: item))
            try context.insert(
                EntitySnapshot(entityName: "Bookmark", id: bookmark, values: ["item": .uuid(item)], toMany: ["items": [item]]))
        }
        try fixture.store.write { try $0.delete(entityName: "Item", id: item) }
        try fixture.store.read { context throws in
            #expect(try context.fetchSnapshot(entityName: "Bookmark", id: bookmark)?["item"] == .null)
            #expect(try context.relatedIDs(entityName: "Bookmark", id: bookmark, relationship: "items").isEmpty)
        }
        let deleted = try #require(try fixture.store.history(after: nil).last)
        #expect(deleted.changes.first { $0.objectID == bookmark }?.updatedProperties == ["item", "items"])
    }
}
