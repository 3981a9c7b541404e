import Foundation

/// The compact binary form of a transaction's changes, stored in one BLOB per transaction.
///
/// One row per change with its own indexes would cost about as much as the data rows themselves;
/// one blob per transaction costs a few bytes per change. Names are kept in a string table inside
/// the blob, so a blob stays readable after the schema renames or removes things.
///
/// ```
/// blob      := version=1, varint nameCount, name*, varint changeCount, change*
/// name      := varint byteCount, UTF-8 bytes
/// change    := type (0 insert, 1 update, 2 delete), varint entityName, 16 bytes object id, detail
/// detail    := insert: nothing
///            | update: varint count, varint propertyName*
///            | delete: varint count, (varint propertyName, value)*      -- the tombstone
/// value     := tag (0 null, 1 string, 2 int64, 3 double, 4 bool, 5 date, 6 data, 7 uuid, 8 url,
///              9 decimal, 10 json), then: text/data as varint byteCount + bytes; int64 and date
///              (milliseconds) as zigzag varints; double as 8 bytes little-endian; bool as 1 byte;
///              uuid as 16 bytes
/// ```
enum HistoryEncoding {
    static let version: UInt8 = 1

    /// Encodes changes whose entity and property names come from `entityNames`.
    static func encode(_ changes: [HistoryRecorder.Change], entityNames: (Int) -> String) -> [UInt8] {
        var writer = Writer()
        var names: [String] = []
        var nameIndex: [String: Int] = [:]
        func intern(_ name: String) -> Int {
            if let index = nameIndex[name] { return index }
            nameIndex[name] = names.count
            names.append(name)
            return names.count - 1
        }
        var entityIndex: [Int: Int] = [:]
        var body = Writer()
        body.bytes.reserveCapacity(changes.count * 19)
        body.varint(UInt64(changes.count))
        for change in changes {
            let entity: Int
            if let known = entityIndex[change.entity] {
                entity = known
            } else {
                entity = intern(entityNames(change.entity))
                entityIndex[change.entity] = entity
            }
            switch change.type {
            case .insert:
                body.byte(0)
                body.varint(UInt64(entity))
                body.uuid(change.id)
            case .update:
                body.byte(1)
                body.varint(UInt64(entity))
                body.uuid(change.id)
                body.varint(UInt64(change.updated.count))
                for property in change.updated.sorted() { body.varint(UInt64(intern(property))) }
            case .delete:
                body.byte(2)
                body.varint(UInt64(entity))
                body.uuid(change.id)
                body.varint(UInt64(change.tombstone.count))
                for (property, value) in change.tombstone.sorted(by: { $0.key < $1.key }) {
                    body.varint(UInt64(intern(property)))
                    body.value(value)
                }
            }
        }
        writer.byte(version)
        writer.varint(UInt64(names.count))
        for name in names { writer.text(name) }
        writer.bytes.append(contentsOf: body.bytes)
        return writer.bytes
    }

    /// Decodes a blob; `keepEntity` filters changes by entity name before they are built.
    static func decode(_ data: Data, keepEntity: (String) -> Bool = { _ in true }) throws -> [HistoryChange] {
        try data.withUnsafeBytes { raw in
            var reader = Reader(bytes: raw.bindMemory(to: UInt8.self))
            guard try reader.byte() == version else {
                throw StoreError(.corrupt, "a history transaction was written by a newer CloudStore (unknown encoding)")
            }
            let nameCount = try reader.varint()
            var names: [String] = []
            names.reserveCapacity(Int(min(nameCount, 10_000)))
            for _ in 0..<nameCount { names.append(try reader.text()) }
            func name(_ index: UInt64) throws -> String {
                guard index < names.count else { throw Reader.damaged }
                return names[Int(index)]
            }
            let count = try reader.varint()
            var changes: [HistoryChange] = []
            changes.reserveCapacity(Int(min(count, 1_000_000)))
            for _ in 0..<count {
                let type = try reader.byte()
                let entity = try name(try reader.varint())
                let id = try reader.uuid()
                var change = HistoryChange(entityName: entity, objectID: id, changeType: .insert)
                switch type {
                case 0: break
                case 1:
                    change.changeType = .update
                    for _ in 0..<(try reader.varint()) { change.updatedProperties.insert(try name(try reader.varint())) }
                case 2:
                    change.changeType = .delete
                    for _ in 0..<(try reader.varint()) {
                        let property = try name(try reader.varint())
                        change.tombstone[property] = try reader.value()
                    }
                default: throw Reader.damaged
                }
                if keepEntity(entity) { changes.append(change) }
            }
            return changes
        }
    }

    struct Writer {
        var bytes: [UInt8] = []

        mutating func byte(_ value: UInt8) { bytes.append(value) }

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

        mutating func uuid(_ id: UUID) {
            withUnsafeBytes(of: id.uuid) { bytes.append(contentsOf: $0) }
        }

        mutating func text(_ text: String) {
            var text = text
            text.withUTF8 { utf8 in
                varint(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }

        mutating func data(_ data: Data) {
            varint(UInt64(data.count))
            bytes.append(contentsOf: data)
        }

        mutating func value(_ value: AttributeValue) {
            switch value {
            case .null: byte(0)
            case .string(let text): byte(1); self.text(text)
            case .int64(let number): byte(2); signed(number)
            case .double(let number): byte(3); withUnsafeBytes(of: number.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            case .bool(let flag): byte(4); byte(flag ? 1 : 0)
            case .date(let date): byte(5); signed(date.millisecondsSince1970)
            case .data(let data): byte(6); self.data(data)
            case .uuid(let id): byte(7); uuid(id)
            case .url(let url): byte(8); text(url.absoluteString)
            case .decimal(let decimal): byte(9); text(decimal.storedText)
            case .json(let json): byte(10); text(json)
            case .externalData(let external): byte(11); text(external.storedText)
            }
        }
    }

    struct Reader {
        static let damaged = StoreError(.corrupt, "a history transaction's changes are damaged and cannot be read")

        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        mutating func byte() throws -> UInt8 {
            guard position < bytes.count else { throw Self.damaged }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let next = try byte()
                guard shift < 64 else { throw Self.damaged }
                result |= UInt64(next & 0x7F) << shift
                if next < 0x80 { return result }
                shift += 7
            }
        }

        mutating func signed() throws -> Int64 {
            let raw = try varint()
            return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
        }

        mutating func raw(_ count: Int) throws -> UnsafeBufferPointer<UInt8> {
            guard count >= 0, position + count <= bytes.count else { throw Self.damaged }
            defer { position += count }
            return UnsafeBufferPointer(rebasing: bytes[position..<(position + count)])
        }

        mutating func uuid() throws -> UUID {
            let raw = try raw(16)
            var id: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &id) { $0.copyMemory(from: UnsafeRawBufferPointer(raw)) }
            return UUID(uuid: id)
        }

        mutating func text() throws -> String {
            let count = try varint()
            guard count <= UInt64(bytes.count) else { throw Self.damaged }
            return String(decoding: try raw(Int(count)), as: UTF8.self)
        }

        mutating func value() throws -> AttributeValue {
            switch try byte() {
            case 0: return .null
            case 1: return .string(try text())
            case 2: return .int64(try signed())
            case 3:
                let eight = try raw(8)
                var bits: UInt64 = 0
                withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: UnsafeRawBufferPointer(eight)) }
                return .double(Double(bitPattern: UInt64(littleEndian: bits)))
            case 4: return .bool(try byte() != 0)
            case 5: return .date(Date(millisecondsSince1970: try signed()))
            case 6:
                let count = try varint()
                guard count <= UInt64(bytes.count) else { throw Self.damaged }
                return .data(Data(try raw(Int(count))))
            case 7: return .uuid(try uuid())
            case 8:
                let text = try text()
                guard let url = URL(string: text) else { throw Self.damaged }
                return .url(url)
            case 9:
                let text = try text()
                guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { throw Self.damaged }
                return .decimal(decimal)
            case 10: return .json(try text())
            case 11:
                guard let external = ExternalData(storedText: try text()) else { throw Self.damaged }
                return .externalData(external)
            default: throw Self.damaged
            }
        }
    }
}
