//===- Json.cpp - a small JSON reader
//--------------------------------------===//
#include "Json.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

using namespace dcrun::json;

const Value *Value::get(std::string_view key) const {
  for (const auto &[name, value] : object)
    if (name == key)
      return &value;
  return nullptr;
}

namespace {
/// Corrupt files must not overflow the stack.
constexpr int maxDepth = 128;

class Parser {
public:
  Parser(std::string_view text, std::string &error)
      : text(text), error(error) {}

  std::optional<Value> parseDocument() {
    Value value;
    if (!parseValue(value, 0))
      return std::nullopt;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the JSON value");
    return value;
  }

private:
  std::string_view text;
  std::string &error;
  size_t pos = 0;

  std::nullopt_t fail(const char *what) {
    error = "offset " + std::to_string(pos) + ": " + what;
    return std::nullopt;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\r' || text[pos] == '\t'))
      ++pos;
  }

  bool consume(std::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }

  bool parseValue(Value &out, int depth) {
    if (depth > maxDepth)
      return fail("nested too deeply"), false;
    skipSpace();
    if (pos >= text.size())
      return fail("expected a value, found the end"), false;
    char c = text[pos];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = Value::Kind::String;
      return parseString(out.string);
    }
    if (consume("true") || consume("false")) {
      out.kind = Value::Kind::Bool;
      out.boolean = c == 't';
      return true;
    }
    if (consume("null")) {
      out.kind = Value::Kind::Null;
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    return fail("expected a value"), false;
  }

  bool parseObject(Value &out, int depth) {
    out.kind = Value::Kind::Object;
    ++pos; // '{'
    skipSpace();
    if (consume("}"))
      return true;
    for (;;) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a member name in quotes"), false;
      std::string key;
      if (!parseString(key))
        return false;
      skipSpace();
      if (!consume(":"))
        return fail("expected ':' after a member name"), false;
      Value member;
      if (!parseValue(member, depth + 1))
        return false;
      out.object.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (consume("}"))
        return true;
      if (!consume(","))
        return fail("expected ',' or '}' in an object"), false;
    }
  }

  bool parseArray(Value &out, int depth) {
    out.kind = Value::Kind::Array;
    ++pos; // '['
    skipSpace();
    if (consume("]"))
      return true;
    for (;;) {
      Value element;
      if (!parseValue(element, depth + 1))
        return false;
      out.array.push_back(std::move(element));
      skipSpace();
      if (consume("]"))
        return true;
      if (!consume(","))
        return fail("expected ',' or ']' in an array"), false;
    }
  }

  static void appendUtf8(std::string &out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  bool parseHex4(uint32_t &code) {
    if (pos + 4 > text.size())
      return fail("truncated \\u escape"), false;
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= c - '0';
      else if (c >= 'a' && c <= 'f')
        code |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        code |= c - 'A' + 10;
      else
        return fail("bad hex digit in \\u escape"), false;
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos; // opening quote
    for (;;) {
      if (pos >= text.size())
        return fail("unterminated string"), false;
      char c = text[pos++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in a string"), false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return fail("unterminated escape"), false;
      char escape = text[pos++];
      switch (escape) {
      case '"':
      case '\\':
      case '/':
        out += escape;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t code;
        if (!parseHex4(code))
          return false;
        if (code >= 0xd800 && code < 0xdc00 && consume("\\u")) {
          uint32_t low;
          if (!parseHex4(low))
            return false;
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        }
        appendUtf8(out, code);
        break;
      }
      default:
        return fail("unknown escape in a string"), false;
      }
    }
  }

  bool parseNumber(Value &out) {
    size_t start = pos;
    bool integral = true;
    if (text[pos] == '-')
      ++pos;
    auto digits = [&] {
      size_t first = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos > first;
    };
    if (!digits())
      return fail("expected digits"), false;
    if (pos < text.size() && text[pos] == '.') {
      integral = false;
      ++pos;
      if (!digits())
        return fail("expected digits after '.'"), false;
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      integral = false;
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits())
        return fail("expected exponent digits"), false;
    }
    std::string literal(text.substr(start, pos - start));
    out.kind = Value::Kind::Number;
    out.number = std::strtod(literal.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long value = std::strtoll(literal.c_str(), nullptr, 10);
      if (errno == 0)
        out.integer = value;
    }
    return true;
  }
};
} // namespace

std::optional<Value> dcrun::json::parse(std::string_view text,
                                        std::string &error) {
  return Parser(text, error).parseDocument();
}

std::string dcrun::json::quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
        out += escaped;
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}
