@testable import CloudStore
import CloudStoreTesting
import Foundation
import GRDB
import Testing

/// Every attribute type with its edge values: kept exactly, or refused at save with an error that
/// names the entity, attribute and object, and nothing of the unit of work saved.
@Suite("Values are kept exactly or refused at save")
struct StorableValuesTests {
    // MARK: The rule

    @Test(arguments: [
        (AttributeValue.double(.nan), false, "is NaN"), (.double(.nan), true, "is NaN"),
        (.double(-.nan), true, "is NaN"), (.double(.infinity), true, "is inf, which cannot travel"),
        (.double(-.infinity), true, "is -inf, which cannot travel"),
        (.date(Date(timeIntervalSince1970: 8_640_000_000_000.001)), false, "outside what the store keeps"),
        (.date(Date(timeIntervalSince1970: -8_640_000_000_000.001)), true, "outside what the store keeps"),
        (.date(Date(timeIntervalSince1970: .infinity)), false, "outside what the store keeps"),
        (.date(Date(timeIntervalSince1970: .nan)), false, "outside what the store keeps"),
        (.decimal(.nan), false, "is Decimal.nan"),
    ])
    func refused(value: AttributeValue, mirrored: Bool, problem: String) {
        let found = StorableValues.problem(with: value, mirrored: mirrored)
        #expect(found?.contains(problem) == true, "\(value): \(found ?? "kept")")
    }

    @Test(arguments: [
        (AttributeValue.double(.infinity), false), (.double(-.infinity), false), (.double(.greatestFiniteMagnitude), true),
        (.double(-.leastNonzeroMagnitude), true), (.double(-0.0), true), (.double(Double(Float.greatestFiniteMagnitude)), true),
        (.date(Date(timeIntervalSince1970: 8_640_000_000_000)), true), (.date(Date(timeIntervalSince1970: -8_640_000_000_000)), true),
        (.date(.distantFuture), true), (.date(.distantPast), true), (.decimal(.greatestFiniteMagnitude), true),
        (.decimal(.leastNonzeroMagnitude), true), (.string("a\u{0}b"), true), (.int64(.min), true), (.data(Data()), true),
    ])
    func kept(value: AttributeValue, mirrored: Bool) {
        #expect(StorableValues.problem(with: value, mirrored: mirrored) == nil, "\(value)")
    }

    @Test func aRecordsSize_countsInlineTextAndBytesInBase64() {
        let names = ["title", "body", "attachment", "count"]
        let fits: [AttributeValue] = [.string("t"), .string(String(repeating: "x", count: 500_000)), .data(Data(count: 390_000)), .int64(1)]
        let plain = [false, false, false, false]
        #expect(StorableValues.recordSizeProblem(fits, names: names, encrypted: plain) == nil, "500,000 + 520,000 bytes")
        let sealed = StorableValues.recordSizeProblem(fits, names: names, encrypted: [false, true, false, false])
        #expect(sealed?.contains("(body, about 666668 bytes)") == true, "an encrypted body travels in base64: \(sealed ?? "fits")")
        var over = fits
        over[2] = .data(Data(count: 420_000))
        let problem = StorableValues.recordSizeProblem(over, names: names, encrypted: plain)
        #expect(problem?.contains("about 1060001 bytes in a record, more than the 1048576") == true, "\(problem ?? "fits")")
        #expect(problem?.contains("give the largest attribute (attachment, about 560000 bytes) external storage") == true)
        let external: [AttributeValue] = [.string("t"), .null, .externalData(ExternalData(checksum: "x", size: 5_000_000)), .int64(1)]
        #expect(StorableValues.recordSizeProblem(external, names: names, encrypted: plain) == nil, "bytes in a file travel as an asset")
    }

    // MARK: Through the store

    @Test func edgeValues_readBackExactly_inAMirroredEntity() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        var notes: [Note] = []
        for (index, (rating, created, price)) in [
            (Double.greatestFiniteMagnitude, Date(timeIntervalSince1970: 8_640_000_000_000), Decimal.greatestFiniteMagnitude),
            (-Double.greatestFiniteMagnitude, Date(timeIntervalSince1970: -8_640_000_000_000), Decimal.leastFiniteMagnitude),
            (Double.leastNonzeroMagnitude, Date.distantFuture, Decimal.leastNonzeroMagnitude),
            (-0.0, Date.distantPast, Decimal(string: "-12345678901234567890.125")!),
            (Double(Float.greatestFiniteMagnitude), Date(timeIntervalSince1970: 0), Decimal(0)),
        ].enumerated() {
            var note = Note(title: "edge \(index) \u{0} \u{1F600}", priority: index == 0 ? .max : .min)
            note.rating = rating
            note.created = created
            note.price = price
            note.body = index == 0 ? String(repeating: "ü", count: 200_000) : ""
            note.attachment = index == 1 ? Data((0..<256).map { UInt8($0) }) : Data()
            note.link = URL(string: "https://example.com/ä?q=\(index)#f")
            notes.append(note)
        }
        try fixture.store.write { context in for note in notes { try context.insert(note) } }
        let read = try fixture.store.read { context in try notes.map { try context.fetch(Note.self, id: $0.id) } }
        #expect(read == notes)
        #expect(read[3]?.rating.sign == .plus, "-0.0 reads back as 0.0 (equal to it): SQLite keeps no sign of a zero")
        try fixture.store.close()
    }

    @Test func nan_isRefusedAtSave_andNothingOfTheUnitOfWorkIsSaved() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let fine = Note(title: "fine")
        var nan = Note(title: "nan")
        nan.rating = .nan
        let error = storeError {
            try fixture.store.write { context in
                try context.insert(fine)
                try context.insert(nan)
            }
        }
        #expect(error?.code == .invalidValue)
        #expect(
            error?.message
                == "Note.rating of \(nan.id.uuidString) is NaN, which the store cannot hold (SQLite keeps a null in its place): save a number, or nil in an optional attribute")
        #expect(try fixture.store.read { try $0.fetchCount(FetchDescriptor<Note>()) } == 0, "the unit of work was rolled back")

        // An update to NaN is refused and the stored value stays; a snapshot and a Codable entity too.
        try fixture.store.write { try $0.insert(fine) }
        var edited = fine
        edited.rating = .nan
        #expect(storeError { try fixture.store.write { try $0.update(edited) } }?.message.hasPrefix("Note.rating of \(fine.id.uuidString) is NaN") == true)
        let snapshot = EntitySnapshot(entityName: "Note", id: fine.id, values: ["rating": .double(.nan)])
        #expect(storeError { try fixture.store.write { try $0.update(snapshot) } }?.code == .invalidValue)
        var plain = PlainNote(title: "plain")
        plain.rating = .nan
        #expect(storeError { try fixture.store.write { try $0.insert(plain) } }?.code == .invalidValue)
        #expect(try fixture.store.read { try $0.fetch(Note.self, id: fine.id) } == fine)
        try fixture.store.close()
    }

    @Test func infinity_isKeptOnThisDevice_andRefusedInAMirroredEntity() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        var note = Note(title: "far")
        note.rating = -.infinity
        let error = storeError { try fixture.store.write { try $0.insert(note) } }
        #expect(error?.message.hasPrefix("Note.rating of \(note.id.uuidString) is -inf, which cannot travel to the server") == true)
        #expect(error?.message.contains("declare the entity mirrored: false to keep it on this device") == true)
        try fixture.store.close()

        let local = try StoreFixture(schema: ModelStoreTests.schema)
        var gadget = Gadget(name: "far")
        gadget.ratio = .infinity
        gadget.scale = -.infinity
        try local.store.write { try $0.insert(gadget) }
        #expect(try local.store.read { try $0.fetch(Gadget.self, id: gadget.id) } == gadget)
        try local.store.close()
    }

    @Test func datesAndDecimalsTheStoreCannotKeep_areRefused() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        var far = Note(title: "far")
        far.created = Date(timeIntervalSince1970: 1e13)
        #expect(storeError { try fixture.store.write { try $0.insert(far) } }?.message.hasPrefix("Note.created of \(far.id.uuidString) is the date 10000000000000.0 seconds after 1970, outside what the store keeps") == true)
        var nan = Note(title: "nan")
        nan.price = .nan
        #expect(storeError { try fixture.store.write { try $0.insert(nan) } }?.message.hasPrefix("Note.price of \(nan.id.uuidString) is Decimal.nan") == true)
        #expect(try fixture.store.read { try $0.fetchCount(FetchDescriptor<Note>()) } == 0)
        try fixture.store.close()
    }

    @Test func aMirroredObjectTooLargeForARecord_isRefused_externalStorageAndLocalEntitiesAreNot() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        var note = Note(title: "big")
        note.attachment = Data(count: 800_000)
        let error = storeError { try fixture.store.write { try $0.insert(note) } }
        #expect(error?.message.hasPrefix("Note \(note.id.uuidString) cannot be saved: its values take about 1066671 bytes in a record, more than the 1048576 a record carries") == true, "\(String(describing: error))")
        #expect(error?.message.contains("give the largest attribute (attachment, about 1066668 bytes) external storage") == true)
        note.attachment = Data(count: 700_000)
        try fixture.store.write { try $0.insert(note) }
        note.body = String(repeating: "x", count: 200_000)
        #expect(storeError { try fixture.store.write { try $0.update(note) } }?.code == .invalidValue, "an edit that makes it too large")
        try fixture.store.close()

        let local = try StoreFixture(schema: ModelStoreTests.schema)
        var gadget = Gadget(name: "big")
        gadget.blob = Data(count: 2_000_000)
        gadget.photo = Data(count: 3_000_000)
        try local.store.write { try $0.insert(gadget) }
        #expect(try local.store.read { try $0.fetch(Gadget.self, id: gadget.id) }?.blob?.count == 2_000_000)
        try local.store.close()
    }

    // MARK: Stores from before the rule

    @Test func aNullANaNLeftInARequiredAttribute_isNamedByTheFetch_foundByTheCheck_andRepaired() throws {
        let fixture = try StoreFixture(schema: NotesModel.schema)
        let note = Note(title: "rated")
        let other = Note(title: "fine")
        try fixture.store.write { context in
            try context.insert(note)
            try context.insert(other)
        }
        try fixture.store.close()
        // What a NaN saved by an earlier version left: SQLite bound it as NULL.
        let queue = try DatabaseQueue(path: fixture.url.path)
        try queue.write { db in try db.execute(sql: "UPDATE \"Note\" SET rating = NULL WHERE id = ?", arguments: [note.id.uuidString]) }
        try queue.close()

        let store = try fixture.reopen()
        let error = #expect(throws: EntityError.self) { try store.read { try $0.fetch(FetchDescriptor<Note>()) } }
        #expect(error?.description.hasPrefix("Note.rating: the stored value is null but the Swift property is not optional (object \(note.id.uuidString); a NaN saved before CloudStore refused it leaves a null): give it a value with context.update(EntitySnapshot(entityName: \"Note\", id: UUID(uuidString: \"\(note.id.uuidString)\")!, values: [\"rating\": …]))") == true, "\(String(describing: error))")
        let problems = try store.read { try $0.storedValueProblems() }
        #expect(problems.map { "\($0.entityName).\($0.attribute) \($0.objectID)" } == ["Note.rating \(note.id)"])
        #expect(problems.first?.problem.hasPrefix("null, but the attribute is required") == true)

        // The repair the message names: an update of a snapshot, which reads no Swift type.
        try store.write { try $0.update(EntitySnapshot(entityName: "Note", id: note.id, values: ["rating": .double(0)])) }
        #expect(try store.read { try $0.fetch(FetchDescriptor<Note>()) }.count == 2)
        #expect(try store.read { try $0.storedValueProblems() }.isEmpty)
        try store.close()
    }
}
