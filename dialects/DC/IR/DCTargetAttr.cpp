//===- DCTargetAttr.cpp - #dc.target and the module's target
//---------------===//
//
// The attribute keeps a target description's numbers as a dictionary in the
// fields of the description's JSON form, so that one parser (the JSON
// form's) checks them, when the attribute is verified, and rebuilds the
// description for the passes that read it.
//
//===----------------------------------------------------------------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace dc;
namespace json = llvm::json;

/// The description's own fields, which the attribute holds as parameters.
static bool isParameterField(StringRef key) {
  return key == "name" || key == "lowering";
}

/// A JSON value of the description as an attribute: integers where the
/// field is a count of bytes or things, f64 elsewhere.
static Attribute toAttribute(MLIRContext *context, StringRef key,
                             const json::Value &value) {
  Builder builder(context);
  if (const json::Object *object = value.getAsObject()) {
    SmallVector<NamedAttribute> fields;
    for (const auto &[name, field] : *object)
      fields.push_back(builder.getNamedAttr(
          StringRef(name), toAttribute(context, StringRef(name), field)));
    return builder.getDictionaryAttr(fields);
  }
  if (const json::Array *array = value.getAsArray()) {
    SmallVector<Attribute> elements;
    for (const json::Value &element : *array)
      elements.push_back(toAttribute(context, key, element));
    return builder.getArrayAttr(elements);
  }
  if (std::optional<bool> flag = value.getAsBoolean())
    return builder.getBoolAttr(*flag);
  if (std::optional<StringRef> text = value.getAsString())
    return builder.getStringAttr(*text);
  if (TargetDescription::isIntegerField(key))
    if (std::optional<int64_t> integer = value.getAsInteger())
      return builder.getI64IntegerAttr(*integer);
  return builder.getF64FloatAttr(value.getAsNumber().value_or(0));
}

/// The JSON value an attribute of the dictionary stands for; nullopt for
/// an attribute the JSON form has no value for.
static std::optional<json::Value> toJSON(Attribute attr) {
  if (auto dictionary = dyn_cast<DictionaryAttr>(attr)) {
    json::Object object;
    for (NamedAttribute field : dictionary) {
      std::optional<json::Value> value = toJSON(field.getValue());
      if (!value)
        return std::nullopt;
      object[field.getName().getValue()] = std::move(*value);
    }
    return json::Value(std::move(object));
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    json::Array elements;
    for (Attribute element : array) {
      std::optional<json::Value> value = toJSON(element);
      if (!value)
        return std::nullopt;
      elements.push_back(std::move(*value));
    }
    return json::Value(std::move(elements));
  }
  if (auto flag = dyn_cast<BoolAttr>(attr))
    return json::Value(flag.getValue());
  if (auto integer = dyn_cast<IntegerAttr>(attr))
    return json::Value(integer.getInt());
  if (auto real = dyn_cast<FloatAttr>(attr))
    return json::Value(real.getValueAsDouble());
  if (auto text = dyn_cast<StringAttr>(attr))
    return json::Value(text.getValue());
  return std::nullopt;
}

/// The description `name`, `lowering` and `numbers` make, or why not.
static llvm::Expected<TargetDescription>
describe(StringRef name, Lowering lowering, DictionaryAttr numbers) {
  std::optional<json::Value> fields = toJSON(numbers);
  if (!fields)
    return llvm::createStringError(
        "numbers must be integers, floats, booleans, strings, arrays and "
        "dictionaries");
  json::Object *object = fields->getAsObject();
  for (const auto &[key, unused] : *object)
    if (isParameterField(key))
      return llvm::createStringError("numbers must not repeat the parameter '" +
                                     StringRef(key).str() + "'");
  (*object)["name"] = name;
  (*object)["lowering"] = stringifyLowering(lowering);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << *fields;
  return TargetDescription::fromJSON(text);
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef name, Lowering lowering,
                                 int64_t memoryBudget, DictionaryAttr numbers) {
  if (name.empty())
    return emitError() << "target name must not be empty";
  if (memoryBudget <= 0)
    return emitError() << "memory_budget must be positive, got "
                       << memoryBudget;
  if (!numbers)
    return emitError() << "target needs its numbers";
  llvm::Expected<TargetDescription> description =
      describe(name, lowering, numbers);
  if (!description)
    return emitError() << "target numbers: "
                       << llvm::toString(description.takeError());
  return success();
}

TargetAttr TargetAttr::get(MLIRContext *context,
                           const TargetDescription &description,
                           int64_t memoryBudget) {
  json::Value fields = llvm::cantFail(json::parse(description.toJSON()));
  SmallVector<NamedAttribute> numbers;
  for (const auto &[key, value] : *fields.getAsObject())
    if (!isParameterField(key))
      numbers.push_back(
          NamedAttribute(StringAttr::get(context, StringRef(key)),
                         toAttribute(context, StringRef(key), value)));
  return get(context, description.name, description.lowering, memoryBudget,
             DictionaryAttr::get(context, numbers));
}

TargetDescription TargetAttr::getDescription() const {
  llvm::Expected<TargetDescription> description =
      describe(getName(), getLowering(), getNumbers());
  // The verifier built the same description once.
  if (!description)
    llvm::report_fatal_error(llvm::Twine("an unverified #dc.target: ") +
                             llvm::toString(description.takeError()));
  return std::move(*description);
}

TargetAttr dc::findTargetAttr(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (!module)
    return {};
  return dyn_cast_or_null<TargetAttr>(module->getAttr(kTargetAttrName));
}

ModuleTarget dc::getModuleTarget(Operation *op) {
  if (TargetAttr target = findTargetAttr(op))
    return {target.getDescription(), target.getMemoryBudget()};
  TargetDescription preset =
      llvm::cantFail(TargetDescription::getPreset(kDefaultTargetPreset));
  int64_t budget = preset.deviceMemoryBytes;
  return {std::move(preset), budget};
}

LogicalResult DCDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  if (attribute.getName() != kTargetAttrName)
    return success();
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << kTargetAttrName
                           << "' belongs on a module, not on '" << op->getName()
                           << "'";
  if (!isa<TargetAttr>(attribute.getValue()))
    return op->emitError() << "'" << kTargetAttrName
                           << "' must be a #dc.target, got "
                           << attribute.getValue();
  return success();
}
