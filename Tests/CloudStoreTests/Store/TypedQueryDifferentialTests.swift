import CloudStore
import CloudStoreTesting
import Foundation
import Testing

/// Typed queries, differentially: for every form a predicate can take, over a generated set of
/// notes with nulls, empty and non-ASCII strings, extreme numbers and dates, the objects the
/// store's SQL selects are exactly those `Predicate.evaluate` accepts, and sorted fetches come in
/// the order `SortDescriptor` gives in memory.
@Suite("Typed queries select what Predicate.evaluate selects")
struct TypedQueryDifferentialTests {
    /// Strings in NFC, as keyboards produce them (see "Typed queries": strings compare by their
    /// Unicode scalars).
    static let strings = [
        "", "a", "A", "ab", "abc", "Abc", "b", "ba", "a%b", "a_b", "a*b", "a?b", "[x]", "it's", "é", "É", "école",
        "ecole", "naïve", "Straße", "日本語", "日本", "🙂", "a🙂b", "line\nbreak", " spaced ", "\"quoted\"", "Zürich",
    ]
    static let integers: [Int64] = [.min, -1_000_000, -1, 0, 1, 2, 42, 1_000_000, .max]
    static let doubles: [Double] = [
        -.infinity, -.greatestFiniteMagnitude, -1.5, -0.0, 0, .leastNonzeroMagnitude, 0.1, 0.5, 1e308, .infinity,
    ]
    /// Whole milliseconds (as every stored date is), from year 1 to year 9999.
    static let dates: [Date] = [
        -62_135_596_800_000, -1, 0, 1, 999, 1_000, 1_763_700_000_000, 1_763_700_000_001, 253_402_300_799_999,
    ].map { Date(millisecondsSince1970: $0) }
    static let decimals: [Decimal] = [
        Decimal(string: "-1000000000000000000000000000001")!, -1.5, 0, Decimal(string: "0.000000000000000000001")!,
        Decimal(string: "12.5")!, 12.50, 100, Decimal(string: "1000000000000000000000000000001")!,
    ]
    static let links = ["https://example.com", "https://example.com/a", "mailto:x@example.com", "file:///tmp/ü"]
        .map { URL(string: $0)! }
    static let uuids = (0..<3).map { UUID(uuidString: "00000000-0000-0000-0000-00000000000\($0)")! }

    /// The store, the notes as read back, and the folders and tags.
    static func seeded() throws -> (StoreFixture, [Note], [Folder], [Tag]) {
        var random = SeededRandomNumberGenerator(seed: 20261127)  // fixed: a failure replays
        func pick<T>(_ values: [T]) -> T { values[Int(random.next() % UInt64(values.count))] }
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { random.next() % 3 == 0 ? nil : value() }
        let folders = (0..<3).map { Folder(title: "folder \($0)") }
        let tags = (0..<4).map { Tag(name: "tag \($0)") }
        var notes: [Note] = []
        for index in 0..<240 {
            var note = Note(title: pick(strings), pinned: random.next() % 2 == 0, priority: pick(integers))
            note.body = maybe(pick(strings))
            note.created = maybe(pick(dates))
            note.rating = pick(doubles)
            note.link = maybe(pick(links))
            note.externalID = maybe(pick(uuids))
            note.price = maybe(pick(decimals))
            note.metadata = maybe(NoteMetadata(wordCount: Int(random.next() % 3), language: pick(["en", "fr"])))
            note.folder = maybe(pick(folders).id)
            note.tags = tags.filter { _ in random.next() % 3 == 0 }.map(\.id)
            if index < strings.count { note.title = strings[index] }  // every string at least once
            notes.append(note)
        }
        // Kept on this device, so the notes may hold infinities (a mirrored entity refuses them).
        var schema = try Schema.notes()
        for index in schema.entities.indices { schema.entities[index].isMirrored = false }
        let fixture = try StoreFixture(schema: schema)
        try fixture.store.write { context in
            for folder in folders { try context.insert(folder) }
            for tag in tags { try context.insert(tag) }
            for note in notes { try context.insert(note) }
        }
        let stored = try fixture.store.read { try $0.fetch(FetchDescriptor<Note>()) }
        #expect(stored.count == notes.count)
        return (fixture, stored, folders, tags)
    }

    /// Each form a predicate can take, with the values it compares with.
    static func predicates(folders: [Folder], tags: [Tag]) -> [(String, Predicate<Note>)] {
        let folder = folders[0].id
        let tag = tags[1].id
        let absentTag = UUID()
        let exactDate = dates[6]
        let subMillisecond = Date(timeIntervalSince1970: 1_763_700_000.0005)
        let early = Date(timeIntervalSince1970: -0.0004)
        let price = Decimal(string: "12.5")!
        let big = Decimal(string: "1000000000000000000000000000000")!
        let titles = ["a", "é", "日本語", "missing"]
        let priorities: [Int64] = [0, 42, .max]
        let bodies: [String?] = [nil, "abc"]
        let ids = uuids
        let optionalIDs: [UUID?] = uuids
        let distantPast = Date.distantPast
        let distantFuture = Date.distantFuture
        let link = links[1]
        let metadata = NoteMetadata(wordCount: 1, language: "fr")
        let nan = Double.nan
        let infinity = Double.infinity
        let minimum = Int64.min
        var list: [(String, Predicate<Note>)] = []
        func add(_ name: String, _ predicate: Predicate<Note>) { list.append((name, predicate)) }
        // Strings.
        add("title == \"a\"", #Predicate { $0.title == "a" })
        add("title != \"\"", #Predicate { $0.title != "" })
        add("title < \"b\"", #Predicate { $0.title < "b" })
        add("title >= \"é\"", #Predicate { $0.title >= "é" })
        add("title.contains(\"b\")", #Predicate { $0.title.contains("b") })
        add("title.contains(\"\")", #Predicate { $0.title.contains("") })
        add("title.contains(\"%\")", #Predicate { $0.title.contains("%") })
        add("title.contains(\"本\")", #Predicate { $0.title.contains("本") })
        add("title.starts(with: \"a\")", #Predicate { $0.title.starts(with: "a") })
        add("title.starts(with: \"a*\")", #Predicate { $0.title.starts(with: "a*") })
        add("title.starts(with: \"[\")", #Predicate { $0.title.starts(with: "[") })
        add("title.starts(with: \"\")", #Predicate { $0.title.starts(with: "") })
        add("title.isEmpty", #Predicate { $0.title.isEmpty })
        add("title.localizedStandardContains(\"E\")", #Predicate { $0.title.localizedStandardContains("E") })
        add("title.localizedStandardContains(\"STRASSE\")", #Predicate { $0.title.localizedStandardContains("strasse") })
        add("titles.contains(title)", #Predicate { titles.contains($0.title) })
        add("title.starts(with: body)", #Predicate { $0.title.starts(with: $0.body ?? "") })
        // Optional strings.
        add("body == nil", #Predicate { $0.body == nil })
        add("body != nil", #Predicate { $0.body != nil })
        add("body == \"abc\"", #Predicate { $0.body == "abc" })
        add("body != \"abc\"", #Predicate { $0.body != "abc" })
        add("(body ?? \"\").contains(\"a\")", #Predicate { ($0.body ?? "").contains("a") })
        add("(body ?? \"zzz\") > title", #Predicate { ($0.body ?? "zzz") > $0.title })
        add("body?.contains(\"a\") == true", #Predicate { $0.body?.contains("a") == true })
        add("body?.starts(with: \"a\") != true", #Predicate { $0.body?.starts(with: "a") != true })
        add("body?.isEmpty == false", #Predicate { $0.body?.isEmpty == false })
        add("bodies.contains(body)", #Predicate { bodies.contains($0.body) })
        add("!(body == \"abc\")", #Predicate { !($0.body == "abc") })
        // Bools.
        add("pinned", #Predicate { $0.pinned })
        add("!pinned", #Predicate { !$0.pinned })
        add("pinned == false", #Predicate { $0.pinned == false })
        add("pinned != true || title == \"a\"", #Predicate { $0.pinned != true || $0.title == "a" })
        // Integers.
        add("priority == 0", #Predicate { $0.priority == 0 })
        add("priority < 0", #Predicate { $0.priority < 0 })
        add("priority >= Int64.max", #Predicate { $0.priority >= 9_223_372_036_854_775_807 })
        add("priority > minimum", #Predicate { $0.priority > minimum })
        add("-1 <= priority", #Predicate { -1 <= $0.priority })
        add("priorities.contains(priority)", #Predicate { priorities.contains($0.priority) })
        add("(0...42).contains(priority)", #Predicate { (0...42).contains($0.priority) })
        add("(-1..<42).contains(priority)", #Predicate { (-1..<42).contains($0.priority) })
        // Doubles.
        add("rating == 0", #Predicate { $0.rating == 0 })
        add("rating < 0", #Predicate { $0.rating < 0 })
        add("rating > 0.1", #Predicate { $0.rating > 0.1 })
        add("rating <= -infinity", #Predicate { $0.rating <= -infinity })
        add("rating == infinity", #Predicate { $0.rating == infinity })
        add("rating == nan", #Predicate { $0.rating == nan })
        add("rating != nan", #Predicate { $0.rating != nan })
        add("rating < nan", #Predicate { $0.rating < nan })
        add("!(rating >= nan)", #Predicate { !($0.rating >= nan) })
        // Dates.
        add("created == nil", #Predicate { $0.created == nil })
        add("created == exactDate", #Predicate { $0.created == exactDate })
        add("created != exactDate", #Predicate { $0.created != exactDate })
        add("created == subMillisecond", #Predicate { $0.created == subMillisecond })
        add("(created ?? .distantPast) < subMillisecond", #Predicate { ($0.created ?? distantPast) < subMillisecond })
        add("(created ?? .distantFuture) <= exactDate", #Predicate { ($0.created ?? distantFuture) <= exactDate })
        add("(created ?? exactDate) > early", #Predicate { ($0.created ?? exactDate) > early })
        add("(created ?? exactDate) >= early", #Predicate { ($0.created ?? exactDate) >= early })
        add("created?.flatMap > subMillisecond", #Predicate { $0.created.flatMap { $0 > subMillisecond } == true })
        // UUIDs and relationships.
        add("id == first id", #Predicate { $0.id == ids[0] })
        add("ids.contains(externalID)", #Predicate { optionalIDs.contains($0.externalID) })
        add("externalID == nil", #Predicate { $0.externalID == nil })
        add("(externalID ?? ids[0]) < ids[1]", #Predicate { ($0.externalID ?? ids[0]) < ids[1] })
        add("folder == folder", #Predicate { $0.folder == folder })
        add("folder != folder", #Predicate { $0.folder != folder })
        add("folder == nil", #Predicate { $0.folder == nil })
        add("tags.contains(tag)", #Predicate { $0.tags.contains(tag) })
        add("!tags.contains(tag)", #Predicate { !$0.tags.contains(tag) })
        add("tags.contains(absentTag)", #Predicate { $0.tags.contains(absentTag) })
        add("tags.isEmpty", #Predicate { $0.tags.isEmpty })
        add("tags.count >= 2", #Predicate { $0.tags.count >= 2 })
        // Decimals.
        add("price == 12.5", #Predicate { $0.price == price })
        add("(price ?? 0) > 12.5", #Predicate { ($0.price ?? 0) > price })
        add("(price ?? 0) < big", #Predicate { ($0.price ?? 0) < big })
        add("(price ?? 0) >= -1.5", #Predicate { ($0.price ?? 0) >= -1.5 })
        // URLs and JSON.
        add("link == link", #Predicate { $0.link == link })
        add("link != nil", #Predicate { $0.link != nil })
        add("metadata == metadata", #Predicate { $0.metadata == metadata })
        // Combinations.
        add("pinned && (title.contains(\"a\") || priority > 0)", #Predicate {
            $0.pinned && ($0.title.contains("a") || $0.priority > 0)
        })
        add("!(folder == nil || tags.isEmpty)", #Predicate { !($0.folder == nil || $0.tags.isEmpty) })
        add("constant true", #Predicate { _ in true })
        add("constant false", #Predicate { _ in false })
        return list
    }

    @Test func everyForm_selectsWhatEvaluateSelects() throws {
        let (fixture, notes, folders, tags) = try Self.seeded()
        var discriminating = 0
        let predicates = Self.predicates(folders: folders, tags: tags)
        for (name, predicate) in predicates {
            let selected = Set(try fixture.store.read { try $0.fetchIDs(FetchDescriptor(predicate: predicate)) })
            let expected = Set(try notes.filter { try predicate.evaluate($0) }.map(\.id))
            let extra = notes.filter { selected.contains($0.id) && !expected.contains($0.id) }
            let missing = notes.filter { !selected.contains($0.id) && expected.contains($0.id) }
            #expect(
                extra.isEmpty && missing.isEmpty,
                "\(name): the store also selects \(extra.prefix(3).map(Self.describe)), and misses \(missing.prefix(3).map(Self.describe))")
            let count = try fixture.store.read { try $0.fetchCount(FetchDescriptor(predicate: predicate)) }
            #expect(count == expected.count, "\(name): fetchCount")
            if !expected.isEmpty && expected.count < notes.count { discriminating += 1 }
        }
        // The data set tells the forms apart: most select some objects and not others.
        #expect(discriminating * 10 >= predicates.count * 8, "only \(discriminating) of \(predicates.count) predicates select a proper subset")
    }

    @Test func formsWithoutSQL_areNamedErrors() throws {
        let (fixture, _, _, tags) = try Self.seeded()
        let tag = tags[0].id
        let cases: [(Predicate<Note>, String)] = [
            (#Predicate { $0.priority + 1 > 2 }, "arithmetic (+, -, *)"),
            (#Predicate { $0.body! == "x" }, "a forced unwrap (!)"),
            (#Predicate { $0.tags.contains { $0 == tag } }, "contains(where:)"),
            (#Predicate { $0.pinned ? $0.priority > 1 : false }, "a conditional"),
            (#Predicate { $0.title.count > 3 }, "$0.title.count"),
        ]
        for (predicate, named) in cases {
            let error = storeError { _ = try fixture.store.read { try $0.fetch(FetchDescriptor(predicate: predicate)) } }
            #expect(error?.code == .unsupportedQuery)
            #expect(error?.message.contains(named) == true, "\(error?.message ?? "no error") names \(named)")
            #expect(error?.message.contains("cannot turn into SQL;") == true)
        }
        // A constant part of a predicate is computed, as evaluate computes it.
        let limit: Int64 = 41
        let computed = try fixture.store.read {
            try $0.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.priority == limit + 1 }))
        }
        #expect(computed == (try fixture.store.read { try $0.fetchCount(FetchDescriptor<Note>(predicate: #Predicate { $0.priority == 42 })) }))
    }

    @Test func sorts_comeInTheOrderSortDescriptorGives() throws {
        let (fixture, notes, _, _) = try Self.seeded()
        let sorts: [(String, [SortDescriptor<Note>])] = [
            ("title", [SortDescriptor(\.title)]),
            ("title reversed", [SortDescriptor(\.title, order: .reverse)]),
            ("body (nil first)", [SortDescriptor(\.body)]),
            ("created reversed", [SortDescriptor(\.created, order: .reverse)]),
            ("priority, rating", [SortDescriptor(\.priority), SortDescriptor(\.rating, order: .reverse)]),
            ("price", [SortDescriptor(\.price)]),
            ("pinned, title", [SortDescriptor(\.externalID), SortDescriptor(\.title)]),
            ("id", [SortDescriptor(\.id)]),
        ]
        for (name, sortBy) in sorts {
            let fetched = try fixture.store.read { try $0.fetch(FetchDescriptor(sortBy: sortBy)) }.map(\.id)
            // The store breaks ties by id; so does the expected order.
            let expected = notes.sorted(using: sortBy + [SortDescriptor(\.id)]).map(\.id)
            #expect(fetched == expected, "sorted by \(name)")
        }
    }

    @Test func limitAndOffset_pageThroughTheSortedObjects() throws {
        let (fixture, notes, _, _) = try Self.seeded()
        let sortBy = [SortDescriptor(\Note.title), SortDescriptor(\Note.priority)]
        let expected = notes.sorted(using: sortBy + [SortDescriptor(\.id)]).map(\.id)
        var pages: [UUID] = []
        for page in 0..<5 {
            let descriptor = FetchDescriptor<Note>(sortBy: sortBy, fetchLimit: 50, fetchOffset: page * 50)
            pages += try fixture.store.read { try $0.fetchIDs(descriptor) }
        }
        #expect(pages == expected)
        let counted = try fixture.store.read {
            try $0.fetchCount(FetchDescriptor<Note>(fetchLimit: 50, fetchOffset: 220))
        }
        #expect(counted == 20)
    }

    static func describe(_ note: Note) -> String {
        "\(note.title.debugDescription)/body \(note.body.debugDescription)/priority \(note.priority)/rating \(note.rating)/created \(note.created.map { "\($0.millisecondsSince1970)" } ?? "nil")/price \(note.price.map { "\($0)" } ?? "nil")"
    }
}
