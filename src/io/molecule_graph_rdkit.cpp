// parse_smiles through RDKit's SmilesToMol (built when WEFT_WITH_RDKIT finds RDKit). RDKit
// reports why a SMILES fails on its error log rather than in the return value, so the log is
// captured for the duration of the call and its text becomes the weft::Error message.
#include <GraphMol/GraphMol.h>
#include <GraphMol/MolOps.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <RDGeneral/RDLog.h>

#include <cctype>
#include <memory>
#include <mutex>
#include <sstream>

#include "text_input.h"
#include "weft/core/error.h"
#include "weft/io/input_limits.h"
#include "weft/io/molecule_graph.h"

namespace weft::io {
namespace {

// Redirects RDKit's error and warning logs into a string while alive. RDKit's loggers are
// process-wide, hence the lock.
class CapturedRdkitLog {
 public:
  CapturedRdkitLog() : lock_(mutex()) {
    // RDKit's loggers exist only once initialised; nothing is logged (or captured) before.
    if (!rdErrorLog) RDLog::InitLogs();
    for (auto* log : {&rdErrorLog, &rdWarningLog})
      if (*log) {
        saved_.push_back({log->get(), (*log)->dp_dest, (*log)->df_enabled});
        (*log)->dp_dest = &text_;
        (*log)->df_enabled = true;
      }
  }
  ~CapturedRdkitLog() {
    for (const Saved& s : saved_) {
      s.logger->dp_dest = s.dest;
      s.logger->df_enabled = s.enabled;
    }
  }
  CapturedRdkitLog(const CapturedRdkitLog&) = delete;
  CapturedRdkitLog& operator=(const CapturedRdkitLog&) = delete;

  // The logged lines without RDKit's "[hh:mm:ss] " stamps, joined by "; ".
  std::string text() const {
    std::istringstream in(text_.str());
    std::string out;
    for (std::string line; std::getline(in, line);) {
      if (line.size() > 11 && line[0] == '[' && line[9] == ']') line.erase(0, 11);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
      if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
    }
    return out;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  struct Saved {
    boost::logging::rdLogger* logger;
    std::ostream* dest;
    bool enabled;
  };
  std::lock_guard<std::mutex> lock_;
  std::ostringstream text_;
  std::vector<Saved> saved_;
};

Hybridization hybridization(RDKit::Atom::HybridizationType type) {
  switch (type) {
    case RDKit::Atom::S:
      return Hybridization::kS;
    case RDKit::Atom::SP:
      return Hybridization::kSP;
    case RDKit::Atom::SP2:
      return Hybridization::kSP2;
    case RDKit::Atom::SP3:
      return Hybridization::kSP3;
    case RDKit::Atom::SP3D:
      return Hybridization::kSP3D;
    case RDKit::Atom::SP3D2:
      return Hybridization::kSP3D2;
    default:
      return Hybridization::kOther;
  }
}

BondType bond_type(RDKit::Bond::BondType type) {
  switch (type) {
    case RDKit::Bond::SINGLE:
      return BondType::kSingle;
    case RDKit::Bond::DOUBLE:
      return BondType::kDouble;
    case RDKit::Bond::TRIPLE:
      return BondType::kTriple;
    case RDKit::Bond::AROMATIC:
      return BondType::kAromatic;
    default:
      return BondType::kOther;
  }
}

// Runs one RDKit step on `smiles`; an RDKit failure (thrown, logged or both) becomes a
// weft::Error naming the SMILES. `step` returns false when RDKit gave no molecule.
template <typename Step>
void rdkit_step(const std::string& smiles, Step step) {
  CapturedRdkitLog log;
  std::string reason;
  try {
    if (step()) return;
  } catch (const std::exception& e) {
    reason = e.what();
  }
  // A sanitization error is both thrown and logged; say it once.
  const std::string logged = log.text();
  if (reason.empty() || logged.find(reason) != std::string::npos) reason = logged;
  fail("smiles", "cannot parse ", detail::quoted(smiles), ": ",
       reason.empty() ? "invalid SMILES" : reason);
}

// RDKit tries subsets of the wildcard atoms of an aromatic system it cannot kekulize, one
// kekulization per subset: exponential in the wildcards in rings, so those are counted (on
// the unsanitized molecule, whose rings fastFindRings finds in linear time) and bounded first.
void check_ring_wildcards(RDKit::RWMol& mol, std::string_view text) {
  RDKit::MolOps::fastFindRings(mol);
  std::int64_t ring_wildcards = 0;
  for (const RDKit::Atom* atom : mol.atoms())
    if (atom->getAtomicNum() == 0 && mol.getRingInfo()->numAtomRings(atom->getIdx()) > 0)
      ++ring_wildcards;
  mol.getRingInfo()->reset();  // sanitization finds the rings it wants (SSSR) itself
  const std::int64_t limit = input_limits().max_ring_wildcards;
  if (ring_wildcards > limit)
    fail("smiles", detail::quoted(text), " has ", ring_wildcards,
         " wildcard atoms (*) in rings, more than ", limit, " ", limit_hint("max_ring_wildcards"));
}

std::unique_ptr<RDKit::RWMol> parse(const std::string& smiles) {
  // What SmilesToMol does by default (remove hydrogens, sanitize) but without its
  // stereochemistry perception: the features do not use it, and its legacy CIP ranking is
  // superlinear (5 s for a 1,000-atom chain with it, milliseconds without).
  std::unique_ptr<RDKit::RWMol> mol;
  rdkit_step(smiles, [&] {
    RDKit::SmilesParserParams params;
    params.sanitize = false;
    params.removeHs = false;
    params.allowCXSMILES = false;
    params.parseName = false;
    mol.reset(RDKit::SmilesToMol(smiles, params));
    return mol != nullptr;
  });
  check_ring_wildcards(*mol, smiles);
  rdkit_step(smiles, [&] {
    RDKit::MolOps::removeHs(*mol, /*implicitOnly=*/false, /*updateExplicitCount=*/true,
                            /*sanitize=*/true);
    return true;
  });
  return mol;
}

// SMILES is printable ASCII without spaces; anything else (a NUL, a space before a name, a
// high byte) would make RDKit read a prefix of the text as the whole molecule. The number of
// atoms is bounded before RDKit runs: every atom is a letter outside brackets or one bracket.
void check_smiles_text(std::string_view text) {
  if (text.empty()) fail("smiles", "cannot parse an empty SMILES string");
  std::int64_t atoms_at_most = 0;
  bool in_bracket = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c <= 0x20 || c >= 0x7F)
      fail("smiles", "column ", i + 1, " of ", detail::quoted(text), ": byte 0x",
           detail::hex_byte(text[i]),
           " cannot appear in a SMILES string (printable ASCII without spaces)");
    if (c == '[') {
      in_bracket = true;
      ++atoms_at_most;
    } else if (c == ']') {
      in_bracket = false;
    } else if (!in_bracket && std::isalpha(c)) {
      ++atoms_at_most;
    }
  }
  const std::int64_t limit = input_limits().max_molecule_atoms;
  if (atoms_at_most > 2 * limit)
    fail("smiles", detail::quoted(text), " has more than ", limit, " atoms ",
         limit_hint("max_molecule_atoms"));
}

}  // namespace

bool smiles_parser_available() { return true; }

MoleculeGraph parse_smiles(std::string_view text) {
  check_smiles_text(text);
  MoleculeGraph graph;
  graph.smiles = std::string(text);
  const std::unique_ptr<RDKit::RWMol> mol = parse(graph.smiles);
  const std::int64_t limit = input_limits().max_molecule_atoms;
  if (std::int64_t(mol->getNumAtoms()) > limit)
    fail("smiles", detail::quoted(text), " has ", mol->getNumAtoms(), " atoms, more than ", limit,
         " ", limit_hint("max_molecule_atoms"));
  const RDKit::RingInfo* rings = mol->getRingInfo();
  for (const RDKit::Atom* atom : mol->atoms()) {
    AtomInfo info;
    info.atomic_number = atom->getAtomicNum();
    info.symbol = atom->getSymbol();
    info.degree = int(atom->getDegree());
    info.formal_charge = atom->getFormalCharge();
    info.aromatic = atom->getIsAromatic();
    info.hybridization = hybridization(atom->getHybridization());
    info.hydrogens = int(atom->getTotalNumHs());
    info.in_ring = rings->numAtomRings(atom->getIdx()) > 0;
    graph.atoms.push_back(std::move(info));
  }
  for (const RDKit::Bond* bond : mol->bonds()) {
    BondInfo info;
    info.begin = std::int32_t(bond->getBeginAtomIdx());
    info.end = std::int32_t(bond->getEndAtomIdx());
    info.type = bond_type(bond->getBondType());
    info.conjugated = bond->getIsConjugated();
    info.in_ring = rings->numBondRings(bond->getIdx()) > 0;
    graph.bonds.push_back(info);
  }
  return graph;
}

}  // namespace weft::io
